#!/usr/bin/env bash
# pagoda-decode-bench --mode profile on the tiny preset (2 layers): exits 0, prints a
# prefill and a decode table per batch size with every op row, names every MatMul weight
# (no "matmul ?" row) and counts calls per step exactly. Never looks at the times.
set -euo pipefail
bench="$1"
out=$("$bench" --mode profile --preset tiny --threads 1 --batch-sizes 1,3 --context 20 \
  --decode-tokens 4)
echo "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $(grep -c '^prefill: ' <<<"$out") == 2 ]] || fail "expected 2 prefill tables"
[[ $(grep -c '^decode: ' <<<"$out") == 2 ]] || fail "expected 2 decode tables"
for row in embed rms_norm 'matmul qkv' 'matmul o' 'matmul gate_up' 'matmul down' \
  'matmul lm_head' rope write_kv attention silu_mul add add_bias prepare_batch gather_logits \
  read_logits sampling detokenize 'scheduling/other' total; do
  n=$(grep -cE "^  ${row} +[0-9]" <<<"$out" || true)
  [[ $n == 4 ]] || fail "row '$row' appears $n times, want 4"
done
grep -q 'matmul ?' <<<"$out" && fail "an unnamed MatMul weight"
# Exact calls per step: 2 layers, one fused QKV product each; lm_head once; RMSNorm 2 per
# layer + the final one; every sequence of a decode step in one step.
grep -qE '^decode: 3 steps, 3.0 seqs and 3.0 tokens per step' <<<"$out" || fail "decode steps"
grep -qE '^  matmul qkv +[0-9.]+ +[0-9.]+% +2.0$' <<<"$out" || fail "qkv calls/step"
grep -qE '^  matmul lm_head +[0-9.]+ +[0-9.]+% +1.0$' <<<"$out" || fail "lm_head calls/step"
grep -qE '^  rms_norm +[0-9.]+ +[0-9.]+% +5.0$' <<<"$out" || fail "rms_norm calls/step"
grep -qE '^  attention +[0-9.]+ +[0-9.]+% +2.0$' <<<"$out" || fail "attention calls/step"
echo PASS
