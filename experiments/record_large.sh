#!/usr/bin/env bash
# Records the large random samples that `autotune simulate` benchmarks strategies on.
# Run on a GPU machine from the project root:
#   bash experiments/record_large.sh PART [DB] [SECONDS]
#   PART = softmax-4096 | softmax-1024 | online-4096
# Each part is one random-search session (seed 11, 2000 configs, 40 ms of GPU time per
# config).  A call stops after SECONDS (default 540); calling again resumes the unfinished
# session of that part, so a long recording can be made in several short calls.
set -euo pipefail
part=${1:?part: softmax-4096, softmax-1024 or online-4096}
db=${2:-cache.db}
seconds=${3:-540}
case $part in
  softmax-4096) kernel=softmax shape=4096x32000 ;;
  softmax-1024) kernel=softmax shape=1024x50257 ;;
  online-4096) kernel=softmax-online shape=4096x32000 ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
unfinished=$(python3 - "$db" "$kernel" "$shape" <<'PY'
import json, sqlite3, sys
db, kernel, shape = sys.argv[1:]
try:
    rows = sqlite3.connect(db).execute(
        "SELECT id, shape, exit_reason FROM sessions WHERE kernel=? AND strategy='random' AND seed=11"
        " AND budget=2000 ORDER BY id DESC", (kernel,)).fetchall()
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
  python3 -m autotune.cli tune "$kernel" --shape "$shape" --dtype float16 --strategy random --seed 11 \
    --budget 2000 --generation-size 64 "${common[@]}"
fi
