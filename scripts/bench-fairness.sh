#!/usr/bin/env bash
# Two tenants on one daemon, tenant A offering 10x tenant B's load, equal weights: B alone,
# then A and B together, under the given scheduling policy. Prints B's TTFT alone and both
# tenants' rows and Jain's index together (pagoda-bench's report). Needs a built tree.
#
# Usage: scripts/bench-fairness.sh [fair|fcfs] [max_seqs=16] [b_concurrency=8]
#   A's concurrency is 10x B's; B sends 12x its concurrency requests, A 10x that.
#   128 prompt / 128 output tokens, stories260K (the built-in model), CPU, 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
POLICY=${1:-fair}
MAX_SEQS=${2:-16}
CB=${3:-8}
CA=$((CB * 10))
NB=$((CB * 12))
NA=$((NB * 10))
OUT=${OUT:-$(mktemp -d)}
KA="key-a-$RANDOM$RANDOM"
KB="key-b-$RANDOM$RANDOM"
digest() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat >"$OUT/tenants.json" <<EOF
{"tenants": [{"name": "a", "api_key_sha256": ["$(digest "$KA")"], "weight": 1},
             {"name": "b", "api_key_sha256": ["$(digest "$KB")"], "weight": 1}]}
EOF
"$BIN/pagoda" serve --tenants "$OUT/tenants.json" --scheduling-policy "$POLICY" \
  --max-seqs "$MAX_SEQS" --threads 2 --host 127.0.0.1 --port 0 --metrics-port -1 \
  >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 200); do
  PORT=$(sed -n 's/.*serving on [0-9.]*:\([0-9]*\).*/\1/p' "$OUT/serve.log")
  [ -n "$PORT" ] && break
  sleep 0.05
done
common=(--server "127.0.0.1:$PORT" --input_len 128 --output_len 128 --ignore_eos
  --range_ratio 0 --progress=false)
echo "== $POLICY: tenant b alone (concurrency $CB)"
"$BIN/pagoda-bench" "${common[@]}" --tenant "name=b,key=$KB,concurrency=$CB,num-prompts=$NB" \
  --json_out "$OUT/alone.json" | grep -E "TTFT \(ms\)"
echo "== $POLICY: tenant a (concurrency $CA) and tenant b (concurrency $CB) together"
"$BIN/pagoda-bench" "${common[@]}" \
  --tenant "name=a,key=$KA,concurrency=$CA,num-prompts=$NA" \
  --tenant "name=b,key=$KB,concurrency=$CB,num-prompts=$NB" \
  --json_out "$OUT/both.json" | sed -n '/^---- Tenant/,$p'
echo "(JSON: $OUT)"
