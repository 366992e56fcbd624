#!/usr/bin/env bash
# Records the large random samples that `autotune simulate` benchmarks strategies on.
# Run on a GPU machine from the project root:
#   bash experiments/record_large.sh PART [DB] [SECONDS]
#   PART = softmax-4096 | softmax-1024 | online-4096 | layernorm-16k | rmsnorm-16k
# Each part is one random-search session (seed 11, 2000 configs, 40 ms of GPU time per
# config).  A call stops after SECONDS (default 540); calling again resumes the unfinished
# session of that part, so a long recording can be made in several short calls.
set -euo pipefail
part=${1:?part: softmax-4096, softmax-1024, online-4096, layernorm-16k or rmsnorm-16k}
db=${2:-cache.db}
seconds=${3:-540}
dtype=float16
case $part in
  softmax-4096) kernel=softmax shape=4096x32000 ;;
  softmax-1024) kernel=softmax shape=1024x50257 ;;
  online-4096) kernel=softmax-online shape=4096x32000 ;;
  # Two of the matmul + reduction-epilogue family (MxKxN), at a size between seed 004's tables.
  layernorm-16k) kernel=matmul-layernorm shape=16384x512x1024 dtype=bfloat16 ;;
  rmsnorm-16k) kernel=matmul-rmsnorm shape=16384x512x1024 dtype=bfloat16 ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
unfinished=$(python3 - "$db" "$kernel" "$shape" "$dtype" <<'PY'
import json, sqlite3, sys
db, kernel, shape, dtype = sys.argv[1:]
try:
    rows = sqlite3.connect(db).execute(
        "SELECT id, shape, exit_reason FROM sessions WHERE kernel=? AND dtype=? AND strategy='random' AND seed=11"
        " AND budget=2000 ORDER BY id DESC", (kernel, dtype)).fetchall()
except sqlite3.Error:
    rows = []
wanted = [int(d) for d in shape.split("x")]
for session_id, recorded_shape, reason in rows:
    if json.loads(recorded_shape) == wanted and reason not in ("budget", "strategy finished", "strategy exhausted"):
        print(session_id)
        break
PY
)
common=(--db "$db" --seconds "$seconds" --compile-timeout 30 --timing-ms 40)
if [[ -n $unfinished ]]; then
  python3 -m autotune.cli tune --resume "$unfinished" "${common[@]}"
else
  python3 -m autotune.cli tune "$kernel" --shape "$shape" --dtype "$dtype" --strategy random --seed 11 \
    --budget 2000 --generation-size 64 "${common[@]}"
fi
