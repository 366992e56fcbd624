#!/usr/bin/env bash
# Records the large random samples that `autotune simulate` benchmarks strategies on; see
# experiments/record_large.py.  On a GPU machine, from the project root:
#   bash experiments/record_large.sh PART [DB] [SECONDS]
#   PART = softmax-4096 | softmax-1024 | online-4096 | layernorm-16k | rmsnorm-16k
set -euo pipefail
part=${1:?part: softmax-4096, softmax-1024, online-4096, layernorm-16k or rmsnorm-16k}
exec python3 -m experiments.record_large "$part" --db "${2:-user.db}" --seconds "${3:-480}"
