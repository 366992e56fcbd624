#!/usr/bin/env bash
# Records the reference measurements shipped in cache.db (into DB, default user.db, to be merged
# into cache.db).  Run on a GPU machine from the
# project root:  bash experiments/record_core.sh PART [DB]
#   PART = triton        the hand-written Triton softmax's whole space at both shapes
#        | softmax-4096  300 random configs of the Helion softmax at 4096x32000 fp16 (seed 1)
#        | softmax-1024  300 random configs of the Helion softmax at 1024x50257 fp16 (seed 1)
#        | all
set -euo pipefail
part=${1:?part: triton, softmax-4096, softmax-1024 or all}
db=${2:-user.db}  # merge it into cache.db to ship it (autotune merge user.db --into cache.db)
tune() { python3 -m autotune.cli tune "$@" --db "$db" --compile-timeout 30; }
if [[ $part == triton || $part == all ]]; then
  for shape in 4096x32000 1024x50257; do
    tune softmax-triton --shape "$shape" --dtype float16 --strategy grid --budget 1000
  done
fi
if [[ $part == softmax-4096 || $part == all ]]; then
  tune softmax --shape 4096x32000 --dtype float16 --strategy random --budget 300 --seed 1 --generation-size 64
fi
if [[ $part == softmax-1024 || $part == all ]]; then
  tune softmax --shape 1024x50257 --dtype float16 --strategy random --budget 300 --seed 1 --generation-size 64
fi
