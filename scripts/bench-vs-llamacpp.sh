#!/usr/bin/env bash
# The CPU serving comparison of issue 12: pagoda and llama.cpp's llama-server on the same
# GGUF, machine and load, measured by the same client (pagoda-bench; --backend openai for
# llama-server), one server at a time, at concurrency 1, 16 and 64.
#
#   scripts/bench-vs-llamacpp.sh LLAMA_SERVER [MODEL.gguf]
#
# LLAMA_SERVER: llama.cpp's llama-server built from source with native flags
#   (cmake -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release; docs/BENCH.md).
# MODEL.gguf: default a fresh `pagoda make-model --preset 76m` (random Llama, dim 768,
#   12 layers, 12/4 heads, FFN 2048, vocab 512, f32).
# Each level runs both servers with as many slots as streams (pagoda --max-seqs, llama-server
# --parallel), 2 threads each, 128 prompt tokens (random ids), 128 output tokens, EOS ignored.
# Environment: BUILD (default build), THREADS (2), LEVELS ("1:6 16:64 64:128", concurrency:
# requests), OUT (a folder for the JSON results; default a temp dir). Run it on a quiet
# machine: it prints the load average before each run.
set -euo pipefail

llama_server=${1:?usage: $0 LLAMA_SERVER [MODEL.gguf]}
build=${BUILD:-build}
threads=${THREADS:-2}
levels=${LEVELS:-"1:6 16:64 64:128"}
out=${OUT:-$(mktemp -d)}
pagoda="$build/bin/pagoda"
bench="$build/bin/pagoda-bench"
mkdir -p "$out"

model=${2:-}
if [ -z "$model" ]; then
  model="$out/76m.gguf"
  "$pagoda" make-model --preset 76m --out "$model" >/dev/null
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits until something accepts connections on 127.0.0.1:$1 (at most 120 s).
wait_port() {
  for _ in $(seq 1 240); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.5
  done
  echo "nothing listens on port $1" >&2
  return 1
}

server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap stop_server EXIT

# run_level NAME CONCURRENCY REQUESTS -- bench flags...
run_bench() {
  local name=$1 conc=$2 n=$3; shift 3
  echo "== $name concurrency $conc, $n requests; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bench" "$@" --concurrency "$conc" --num-prompts "$n" --warmup 2 --input-len 128 \
    --output-len 128 --ignore-eos --seed 1 --progress=false \
    --json-out "$out/$name-c$conc.json" >"$out/$name-c$conc.txt"
  grep -E "Output token throughput|Mean TTFT|Median TTFT|Median TPOT|Successful" \
    "$out/$name-c$conc.txt" | sed 's/^/   /'
}

for level in $levels; do
  conc=${level%%:*}
  n=${level##*:}

  port=$(free_port)
  "$pagoda" serve --model "$model" --port "$port" --metrics-port -1 --threads "$threads" \
    --max-seqs "$conc" --log-level warn >"$out/pagoda-c$conc.log" 2>&1 &
  server_pid=$!
  wait_port "$port"
  run_bench pagoda "$conc" "$n" --server "127.0.0.1:$port"
  stop_server

  port=$(free_port)
  "$llama_server" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
    --parallel "$conc" -c $((conc * 256)) --cont-batching --no-webui \
    >"$out/llama-c$conc.log" 2>&1 &
  server_pid=$!
  wait_port "$port"
  run_bench llama "$conc" "$n" --backend openai --server "127.0.0.1:$port"
  stop_server
done

python3 - "$out" $levels <<'EOF'
import json, sys
out, levels = sys.argv[1], sys.argv[2:]
print(f"\n| concurrency | pagoda tok/s | llama.cpp tok/s | ratio | pagoda TTFT p50 ms | llama.cpp TTFT p50 ms | pagoda TPOT p50 ms | llama.cpp TPOT p50 ms |")
print("|---|---|---|---|---|---|---|---|")
for level in levels:
    c = level.split(":")[0]
    p = json.load(open(f"{out}/pagoda-c{c}.json"))
    l = json.load(open(f"{out}/llama-c{c}.json"))
    ratio = p["output_throughput"] / l["output_throughput"] if l["output_throughput"] else float("nan")
    print(f"| {c} | {p['output_throughput']:.1f} | {l['output_throughput']:.1f} | {ratio:.2f} | "
          f"{p['median_ttft_ms']:.0f} | {l['median_ttft_ms']:.0f} | {p['median_tpot_ms']:.1f} | {l['median_tpot_ms']:.1f} |")
print(f"\nresults: {out}")
EOF
