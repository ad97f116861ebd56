#!/usr/bin/env bash
# The CPU serving comparison: pagoda and llama.cpp's llama-server on the same GGUF files,
# machine and load, measured by one client speaking one protocol to both (pagoda-bench
# --backend openai: streamed /v1/completions to pagoda's --http-port and to llama-server).
#
#   scripts/bench-vs-llamacpp.sh LLAMA_SERVER [LLAMA_QUANTIZE]
#
# LLAMA_SERVER: llama.cpp's llama-server built from source with native flags
#   (cmake -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release; docs/BENCH.md).
# LLAMA_QUANTIZE: llama.cpp's llama-quantize (default: beside LLAMA_SERVER); it makes the
#   Q8_0 and Q4_K_M files from a fresh `pagoda make-model --preset 76m` (random Llama, dim
#   768, 12 layers, 12/4 heads, FFN 2048, vocab 512, f32).
# For each round, each weight file and each level, both servers run one after the other,
# the first one alternating between rounds; each has as many slots as streams (pagoda
# --max-seqs, llama-server --parallel) and 2 threads; requests have 128 prompt tokens
# (random ids) and 128 output tokens, EOS ignored, greedy. Every run is printed with the
# load average before it, and the table at the end lists every round, not the best.
# pagoda's gRPC door is measured too (a fresh server process after the HTTP run), for the
# record: its client is grpcio-free C++, but it still shares the 2 cores with the server.
# Environment: BUILD (default build), THREADS (2), ROUNDS (3), WEIGHTS ("f32 q8_0 q4_k_m"),
# LEVELS ("1:6 16:64", concurrency:requests), GRPC (1; 0 skips the gRPC runs), OUT (a folder
# for the JSON results; default a temp dir), PAGODA_ARGS (more `pagoda serve` flags, e.g.
# "--kv-cache-dtype f32"). Both servers keep K/V in f16 by default. Run it on a quiet machine.
set -euo pipefail

llama_server=${1:?usage: $0 LLAMA_SERVER [LLAMA_QUANTIZE]}
llama_quantize=${2:-$(dirname "$llama_server")/llama-quantize}
build=${BUILD:-build}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
weights=${WEIGHTS:-"f32 q8_0 q4_k_m"}
levels=${LEVELS:-"1:6 16:64"}
grpc=${GRPC:-1}
pagoda_args=${PAGODA_ARGS:-}
out=${OUT:-$(mktemp -d)}
pagoda="$build/bin/pagoda"
bench="$build/bin/pagoda-bench"
mkdir -p "$out"

f32="$out/76m-f32.gguf"
[ -f "$f32" ] || "$pagoda" make-model --preset 76m --out "$f32" >/dev/null
model_file() {
  local w=$1 file="$out/76m-$1.gguf"
  if [ ! -f "$file" ]; then
    "$llama_quantize" "$f32" "$file" "${w^^}" >"$out/quantize-$w.log" 2>&1
  fi
  echo "$file"
}

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

# run_bench NAME CONCURRENCY REQUESTS -- bench flags...
run_bench() {
  local name=$1 conc=$2 n=$3; shift 3
  echo "== $name concurrency $conc, $n requests; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bench" "$@" --concurrency "$conc" --num-prompts "$n" --warmup 2 --input-len 128 \
    --output-len 128 --ignore-eos --seed 1 --progress=false \
    --json-out "$out/$name.json" >"$out/$name.txt"
  grep -E "Output token throughput|Median TTFT|Median TPOT|Successful" "$out/$name.txt" |
    sed 's/^/   /'
}

# A fresh pagoda for each door: a second run on the same process would find the first
# run's prompts in the prefix cache.
start_pagoda() {  # MODEL CONC LOG GRPC_PORT HTTP_PORT
  "$pagoda" serve --model "$1" --port "$4" --http-port "$5" --metrics-port -1 \
    --threads "$threads" --max-seqs "$2" --log-level warn $pagoda_args >"$3" 2>&1 &
  server_pid=$!
  wait_port "$5"
}

run_pagoda() {  # WEIGHTS_NAME MODEL CONC N ROUND
  local w=$1 model=$2 conc=$3 n=$4 r=$5 gport hport
  gport=$(free_port)
  hport=$(free_port)
  start_pagoda "$model" "$conc" "$out/pagoda-$w-c$conc-r$r.log" "$gport" "$hport"
  run_bench "pagoda-$w-c$conc-r$r" "$conc" "$n" --backend openai --server "127.0.0.1:$hport"
  stop_server
  if [ "$grpc" = 1 ]; then
    start_pagoda "$model" "$conc" "$out/pagoda_grpc-$w-c$conc-r$r.log" "$gport" "$hport"
    run_bench "pagoda_grpc-$w-c$conc-r$r" "$conc" "$n" --server "127.0.0.1:$gport"
    stop_server
  fi
}

run_llama() {  # WEIGHTS_NAME MODEL CONC N ROUND
  local w=$1 model=$2 conc=$3 n=$4 r=$5 port
  port=$(free_port)
  "$llama_server" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
    --parallel "$conc" -c $((conc * 512)) --cont-batching --no-webui \
    >"$out/llama-$w-c$conc-r$r.log" 2>&1 &
  server_pid=$!
  wait_port "$port"
  run_bench "llama-$w-c$conc-r$r" "$conc" "$n" --backend openai --server "127.0.0.1:$port"
  stop_server
}

for r in $(seq 1 "$rounds"); do
  for w in $weights; do
    if [ "$w" = f32 ]; then model=$f32; else model=$(model_file "$w"); fi
    for level in $levels; do
      conc=${level%%:*}
      n=${level##*:}
      if [ $((r % 2)) = 1 ]; then
        run_pagoda "$w" "$model" "$conc" "$n" "$r"
        run_llama "$w" "$model" "$conc" "$n" "$r"
      else
        run_llama "$w" "$model" "$conc" "$n" "$r"
        run_pagoda "$w" "$model" "$conc" "$n" "$r"
      fi
    done
  done
done

python3 - "$out" "$rounds" "$weights" "$levels" <<'EOF'
import json, os, sys
out, rounds, weights, levels = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
def load(name):
    path = f"{out}/{name}.json"
    return json.load(open(path)) if os.path.exists(path) else None
print("\n| weights | conc | round | pagoda HTTP tok/s | llama.cpp tok/s | ratio | TTFT p50 ms pagoda / llama.cpp "
      "| TPOT p50 ms pagoda / llama.cpp | pagoda gRPC tok/s |")
print("|---|---|---|---|---|---|---|---|---|")
for w in weights:
    for level in levels:
        c = level.split(":")[0]
        for r in range(1, rounds + 1):
            p, l, g = (load(f"{s}-{w}-c{c}-r{r}") for s in ("pagoda", "llama", "pagoda_grpc"))
            if p is None or l is None:
                continue
            ratio = p["output_throughput"] / l["output_throughput"] if l["output_throughput"] else float("nan")
            grpc = f"{g['output_throughput']:.1f}" if g else "-"
            print(f"| {w} | {c} | {r} | {p['output_throughput']:.1f} | {l['output_throughput']:.1f} | {ratio:.2f} | "
                  f"{p['median_ttft_ms']:.0f} / {l['median_ttft_ms']:.0f} | "
                  f"{p['median_tpot_ms']:.1f} / {l['median_tpot_ms']:.1f} | {grpc} |")
print(f"\nresults: {out}")
EOF
