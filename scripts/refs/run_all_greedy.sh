#!/bin/bash
# Greedy references for items 0,1,3,4,5 (run from /work/refdata). See MANIFEST.md.
set -euo pipefail
cd /work/refdata
PY=/usr/bin/python3
G=scripts/run_greedy.py
mkdir -p logs
step=${1:-all}
if [[ $step == check || $step == all ]]; then
  $PY $G --fa-check --model /work/main/tests/data/stories260K.gguf --cases prompts/golden_cases.json \
    --n-predict 64 --out /tmp/check_golden.json --log logs/server-check.log
fi
if [[ $step == quant || $step == all ]]; then
  for t in Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q6_K; do
    $PY $G --fa-check --model stories260K-$t.gguf --cases prompts/golden_cases.json --n-predict 64 \
      --out stories260K-$t.golden.json --log logs/server-$t.log \
      --decoding "greedy (temperature 0, top_k 1), BOS prepended, weights as stored ($t file), f32 KV cache"
  done
fi
if [[ $step == rope || $step == all ]]; then
  $PY $G --fa-check --model /work/main/tests/data/stories260K.gguf --cases prompts/long_and_once_cases.json \
    --n-predict 32 --out stories260K-long.golden.json --log logs/server-long.log
  for v in rope-freqs linear yarn; do
    $PY $G --fa-check --model stories260K-$v.gguf --cases prompts/long_and_once_cases.json --n-predict 32 \
      --out stories260K-$v.golden.json --log logs/server-$v.log --extra-args "-lv 4"
  done
fi
if [[ $step == qwen2 || $step == all ]]; then
  $PY $G --fa-check --model stories260K-qwen2.gguf --cases prompts/golden_cases.json --n-predict 64 \
    --out stories260K-qwen2.golden.json --log logs/server-qwen2.log
fi
