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
#   Q8_0 and Q4_K_M files from a fresh f32 `pagoda make-model` of each shape.
# Shapes (SHAPES, default "76m"): 76m (random Llama, dim 768, 12 layers, 12/4 heads, FFN 2048,
#   vocab 512) and llama3-1b (Llama-3.2-1B's dims with the real 128,256-token Llama 3
#   vocabulary, llama.cpp's ggml-vocab-llama-bpe.gguf: VOCAB, default the copy in
#   tests/data/vocab.tar.xz).
# Instruction-set levels (ISAS, default "native"): native runs pagoda at the CPU's own level
#   against LLAMA_SERVER; avx2 runs `pagoda serve --cpu-isa avx2` against LLAMA_SERVER_AVX2,
#   a llama-server built for AVX2 alone (docs/BENCH.md has the cmake line).
# For each round, shape, level, weight file and concurrency, both servers run one after the
# other, the first one alternating between rounds; each has as many slots as streams
# (pagoda --max-seqs, llama-server --parallel) and 2 threads; requests have 128 prompt
# tokens (random ids, from a seed per concurrency, so no run repeats another's prompts) and
# 128 output tokens, EOS ignored, greedy. The CPU and its flags head the output, every run is
# printed with the load average before it, and the table at the end lists every round.
# pagoda's gRPC door is measured too (a fresh server process after the HTTP run), for the
# record: its client is grpcio-free C++, but it still shares the 2 cores with the server.
# Environment: BUILD (default build), THREADS (2), ROUNDS (3), WEIGHTS ("f32 q8_0 q4_k_m"),
# LEVELS ("1:6 16:64", concurrency:requests), GRPC (1; 0 skips the gRPC runs), OUT (a folder
# for the JSON results; default a temp dir), PAGODA_ARGS (more `pagoda serve` flags, e.g.
# "--kv-cache-dtype f32"). Both servers keep K/V in f16 by default. Run it on a quiet machine.
set -euo pipefail

llama_server=${1:?usage: $0 LLAMA_SERVER [LLAMA_QUANTIZE]}
llama_quantize=${2:-$(dirname "$llama_server")/llama-quantize}
shapes=${SHAPES:-76m}
isas=${ISAS:-native}
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

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) hardware threads"
echo "CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
  grep -E '^(avx|avx2|fma|f16c|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | tr '\n' ' ')"
echo "shapes: $shapes; levels: $isas; weights: $weights; streams:requests: $levels; rounds: $rounds"

# The f32 file of a shape, made once.
f32_file() {
  local shape=$1 file="$out/$1-f32.gguf" vocab_flag=()
  if [ ! -f "$file" ]; then
    if [ "$shape" = llama3-1b ]; then
      local vocab=${VOCAB:-}
      if [ -z "$vocab" ]; then
        tar -xJf "$(dirname "$0")/../tests/data/vocab.tar.xz" -C "$out" vocab/ggml-vocab-llama-bpe.gguf
        vocab="$out/vocab/ggml-vocab-llama-bpe.gguf"
      fi
      vocab_flag=(--vocab "$vocab")
    fi
    "$pagoda" make-model --preset "$shape" "${vocab_flag[@]}" --out "$file" >/dev/null
  fi
  echo "$file"
}

model_file() {  # SHAPE WEIGHTS
  local f32 file="$out/$1-$2.gguf"
  f32=$(f32_file "$1")
  if [ "$2" = f32 ]; then
    echo "$f32"
    return
  fi
  if [ ! -f "$file" ]; then
    "$llama_quantize" "$f32" "$file" "${2^^}" >"$out/quantize-$1-$2.log" 2>&1
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
    --output-len 128 --ignore-eos --seed "$conc" --progress=false \
    --json-out "$out/$name.json" >"$out/$name.txt"
  grep -E "Output token throughput|Median TTFT|Median TPOT|Successful" "$out/$name.txt" |
    sed 's/^/   /'
}

# A fresh pagoda for each door: a second run on the same process would find the first
# run's prompts in the prefix cache.
start_pagoda() {  # MODEL CONC LOG GRPC_PORT HTTP_PORT ISA
  local isa=$6
  [ "$isa" = native ] && isa=auto
  "$pagoda" serve --model "$1" --port "$4" --http-port "$5" --metrics-port -1 \
    --threads "$threads" --max-seqs "$2" --cpu-isa "$isa" --log-level warn $pagoda_args \
    >"$3" 2>&1 &
  server_pid=$!
  wait_port "$5"
}

run_pagoda() {  # TAG MODEL CONC N ROUND ISA
  local tag=$1 model=$2 conc=$3 n=$4 r=$5 isa=$6 gport hport
  gport=$(free_port)
  hport=$(free_port)
  start_pagoda "$model" "$conc" "$out/pagoda-$tag-c$conc-r$r.log" "$gport" "$hport" "$isa"
  run_bench "pagoda-$tag-c$conc-r$r" "$conc" "$n" --backend openai --server "127.0.0.1:$hport"
  stop_server
  if [ "$grpc" = 1 ]; then
    start_pagoda "$model" "$conc" "$out/pagoda_grpc-$tag-c$conc-r$r.log" "$gport" "$hport" "$isa"
    run_bench "pagoda_grpc-$tag-c$conc-r$r" "$conc" "$n" --server "127.0.0.1:$gport"
    stop_server
  fi
}

run_llama() {  # TAG MODEL CONC N ROUND ISA
  local tag=$1 model=$2 conc=$3 n=$4 r=$5 isa=$6 port server=$llama_server
  if [ "$isa" = avx2 ]; then server=${LLAMA_SERVER_AVX2:?ISAS has avx2: set LLAMA_SERVER_AVX2}; fi
  port=$(free_port)
  "$server" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
    --parallel "$conc" -c $((conc * 512)) --cont-batching --no-webui \
    >"$out/llama-$tag-c$conc-r$r.log" 2>&1 &
  server_pid=$!
  wait_port "$port"
  run_bench "llama-$tag-c$conc-r$r" "$conc" "$n" --backend openai --server "127.0.0.1:$port"
  stop_server
}

for r in $(seq 1 "$rounds"); do
  for shape in $shapes; do
    for isa in $isas; do
      for w in $weights; do
        model=$(model_file "$shape" "$w")
        tag="$shape-$isa-$w"
        for level in $levels; do
          conc=${level%%:*}
          n=${level##*:}
          if [ $((r % 2)) = 1 ]; then
            run_pagoda "$tag" "$model" "$conc" "$n" "$r" "$isa"
            run_llama "$tag" "$model" "$conc" "$n" "$r" "$isa"
          else
            run_llama "$tag" "$model" "$conc" "$n" "$r" "$isa"
            run_pagoda "$tag" "$model" "$conc" "$n" "$r" "$isa"
          fi
        done
      done
    done
  done
done

python3 - "$out" "$rounds" "$shapes" "$isas" "$weights" "$levels" <<'EOF'
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
shapes, isas, weights, levels = (a.split() for a in sys.argv[3:7])
def load(name):
    path = f"{out}/{name}.json"
    return json.load(open(path)) if os.path.exists(path) else None
print("\n| shape | level | weights | conc | round | pagoda HTTP tok/s | llama.cpp tok/s | ratio "
      "| TTFT p50 ms pagoda / llama.cpp | TPOT p50 ms pagoda / llama.cpp | pagoda gRPC tok/s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for shape in shapes:
    for isa in isas:
        for w in weights:
            for level in levels:
                c = level.split(":")[0]
                for r in range(1, rounds + 1):
                    tag = f"{shape}-{isa}-{w}-c{c}-r{r}"
                    p, l, g = (load(f"{s}-{tag}") for s in ("pagoda", "llama", "pagoda_grpc"))
                    if p is None or l is None:
                        continue
                    lt = l["output_throughput"]
                    ratio = p["output_throughput"] / lt if lt else float("nan")
                    grpc = f"{g['output_throughput']:.1f}" if g else "-"
                    print(f"| {shape} | {isa} | {w} | {c} | {r} | {p['output_throughput']:.1f} | {lt:.1f} | "
                          f"{ratio:.2f} | {p['median_ttft_ms']:.0f} / {l['median_ttft_ms']:.0f} | "
                          f"{p['median_tpot_ms']:.1f} / {l['median_tpot_ms']:.1f} | {grpc} |")
print(f"\nresults: {out}")
EOF
