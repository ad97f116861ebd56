#!/usr/bin/env bash
# gpu-check: the whole CUDA check on a GPU machine in one command, from the archive that
# tools/gpu-bundle.sh made here (no build there; the machine needs only the NVIDIA driver
# and cuBLAS 13). Prints the device, runs every CUDA test, the paged-attention bandwidth
# table, end-to-end decode tokens/s on the random ~1B preset (bf16) and its preemption table
# (recompute vs swap). About 3 to 5 minutes
# on an H200; every step has a time limit so the whole run stays under 9.
#
# Usage: tools/gpu-check.sh [ARCHIVE]     (default gpu-bundle/pagoda-gpu-bundle.tar.xz)
# Env:   OUT   where gpu-check.log, paged_attention.json, decode.json and preempt.txt go, and the whole
#              log of a failing test binary (default /tmp/pagoda-gpu-check/out)
#        WORK  where the archive is unpacked (default /tmp/pagoda-gpu-check)
# Exit status: 0 all passed; 1 a step failed; 3 no GPU here (tests ran and skipped, nothing
# measured).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ARCHIVE=${1:-$ROOT/gpu-bundle/pagoda-gpu-bundle.tar.xz}
WORK=${WORK:-/tmp/pagoda-gpu-check}
OUT=${OUT:-$WORK/out}
B=$WORK/pagoda-gpu
mkdir -p "$OUT"
LOG=$OUT/gpu-check.log

step() { printf '\n==== %s (%s)\n' "$*" "$(date +%T)"; }

# Adds the folder holding `lib` to LD_LIBRARY_PATH unless the loader already finds it.
find_library() {
  local lib=$1 dir
  ldconfig -p 2>/dev/null | grep -q "$lib " && return 0
  for dir in ${LD_LIBRARY_PATH//:/ }; do [ -e "$dir/$lib" ] && return 0; done
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 \
    /usr/local/cuda-*/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
    /usr/lib/x86_64-linux-gnu /usr/lib64; do
    if [ -e "$dir/$lib" ]; then
      export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
      return 0
    fi
  done
  local found
  found=$(timeout 60 find /usr /opt -name "$lib" -print -quit 2>/dev/null)
  if [ -n "$found" ]; then
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:${found%/*}
    export LD_LIBRARY_PATH
    return 0
  fi
  echo "$lib not found on this machine"
  return 1
}

# Runs the four CUDA test binaries side by side; fails on a failure, or on a skip when a
# GPU is present (a skip there means the device was not usable).
run_tests() {
  local status=0 t pids=()
  for t in cuda_backend_test cuda_attention_test cuda_kv_dtype_test cuda_model_test; do
    PAGODA_TESTDATA_DIR=$B/testdata timeout 300 "$B/bin/$t" --gtest_color=no \
      >"$WORK/$t.log" 2>&1 &
    pids+=($!)
  done
  local i=0
  for t in cuda_backend_test cuda_attention_test cuda_kv_dtype_test cuda_model_test; do
    local rc=0
    wait "${pids[$i]}" || rc=$?
    i=$((i + 1))
    local skipped
    skipped=$(grep -cE '^\[  SKIPPED \] .*\(' "$WORK/$t.log")
    grep -E '^\[  (PASSED|FAILED)  \]|^\[==========\] [0-9]+ tests? from .* ran' "$WORK/$t.log" | sed "s/^/$t: /"
    echo "$t: exit $rc, $skipped skipped"
    if [ $rc -ne 0 ]; then
      status=1
      cp "$WORK/$t.log" "$OUT/$t.log"  # the whole log comes back too
      echo "---- $t failures (whole log: \$OUT/$t.log):"
      grep -E -B2 -A12 'Failure|FAILED|Skipped|Timeout' "$WORK/$t.log" | head -200
    elif [ "$HAVE_GPU" = 1 ] && [ "$skipped" -gt 0 ]; then
      status=1
      grep -A1 'Skipped' "$WORK/$t.log" | head -6
    fi
  done
  return $status
}

# The decode benchmark's table as JSON (rows "seqs tok/s ratio").
decode_json() {
  awk -v dev="$DEVICE" 'BEGIN { printf "{\n  \"device\": \"%s\",\n  \"preset\": \"1b\",\n  \"dtype\": \"bf16\",\n  \"context\": 512,\n  \"rows\": [", dev; n = 0 }
    /^ *[0-9]+ +[0-9.]+ +[0-9.]+ *$/ { printf "%s\n    {\"seqs\": %d, \"decode_tok_s\": %s, \"vs_1_seq\": %s}", (n++ ? "," : ""), $1, $2, $3 }
    END { print "\n  ]\n}" }' "$1"
}

main() {
  local status=0
  step "gpu-check in $ROOT, archive $ARCHIVE"
  HAVE_GPU=0
  DEVICE=none
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    HAVE_GPU=1
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem \
      --format=csv
    DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  else
    echo "no GPU here (nvidia-smi missing or found no device): tests will skip, nothing is measured"
  fi
  echo "cores: $(nproc)"

  step "unpack"
  [ -f "$ARCHIVE" ] || { echo "no archive at $ARCHIVE: run tools/gpu-bundle.sh first"; return 1; }
  rm -rf "$B"
  mkdir -p "$WORK"
  if command -v xz >/dev/null; then
    xz -dc "$ARCHIVE" | tar -C "$WORK" -xf - || { echo "cannot unpack $ARCHIVE"; return 1; }
  else  # no xz there: Python's lzma reads the same archive
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$ARCHIVE" "$WORK" || { echo "cannot unpack $ARCHIVE (no xz, python3 failed)"; return 1; }
  fi
  export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local missing=0
  find_library libcublas.so.13 || missing=1
  find_library libcublasLt.so.13 || missing=1
  [ "$HAVE_GPU" = 1 ] && { find_library libcuda.so.1 || missing=1; }
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  if ldd "$B/bin/cuda_backend_test" | grep 'not found'; then
    echo "libraries missing: the binaries cannot start"
    return 1
  fi
  [ $missing -eq 0 ] || status=1

  step "CUDA tests (side by side)"
  run_tests || status=1

  if [ "$HAVE_GPU" != 1 ]; then
    [ $status -eq 0 ] || { step "done: FAILURES above (and no GPU)"; return 1; }
    step "done: NO GPU (tests skipped; benchmarks not run)"
    return 3
  fi

  step "paged-attention decode bandwidth (GQA 32:4, head_dim 128, bf16)"
  timeout 150 "$B/bin/paged_attention_bench" --json="$OUT/paged_attention.json" || status=1

  step "end-to-end decode, random 1b preset, bf16, prompt 512"
  timeout 200 "$B/bin/pagoda-decode-bench" --device=cuda --preset=1b --dtype=bf16 --mode=batch \
    --batch_sizes=1,16,64 --context=512 --decode_tokens=32 | tee "$WORK/decode.txt" || status=1
  decode_json "$WORK/decode.txt" >"$OUT/decode.json"

  step "preemption under KV pressure: recompute vs swap to pinned host memory (1b, bf16)"
  timeout 150 "$B/bin/pagoda-decode-bench" --device=cuda --preset=1b --dtype=bf16 --mode=preempt \
    --requests=64 --context=512 --decode_tokens=256 | tee "$OUT/preempt.txt" || status=1

  step "done: $([ $status -eq 0 ] && echo OK || echo FAILURES above)"
  return $status
}

main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
