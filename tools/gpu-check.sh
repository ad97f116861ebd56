#!/usr/bin/env bash
# gpu-check: the whole CUDA check on a GPU machine in one command, from the archive that
# tools/gpu-bundle.sh made here (no build there; the machine needs only the NVIDIA driver
# and cuBLAS 13). Prints the commit the bundle was built from, then the device; runs every
# CUDA test, the paged-attention bandwidth tables (bf16 and fp8 caches), end-to-end decode
# tokens/s on the random ~1B preset (bf16, over a bf16 and an fp8 KV cache) and its
# preemption table (recompute vs swap), then a compute-sanitizer memcheck pass over the
# attention, fp8 and swap tests. Every step runs under its own time limit
# and the limits plus a start-up allowance add up to at most 540 s, so one device command
# (600 s at most) always ends with the results file written (docs/GPU.md, "The plan").
#
# Usage: tools/gpu-check.sh [--dry-run] [ARCHIVE]   (default gpu-bundle/pagoda-gpu-bundle.tar.xz)
#   --dry-run  (or DRY_RUN=1) prints the plan (each step, its command and limit, the sum)
#              and every test each step would run (the binaries' --gtest_list_tests), then
#              exits 0; runs nothing else (it unpacks the archive unless BUNDLE_DIR is set).
# Env:   OUT         where gpu-check.log, results.json (every figure) and, at the end,
#                    logs.tar.gz (every test log and benchmark output: paged_attention.json,
#                    paged_attention_fp8.json, decode*.json, preempt.txt) go; the whole log
#                    of a failing test binary is copied there as it fails and moved into
#                    the archive at the end (default /tmp/pagoda-gpu-check/out)
#        WORK        where the archive is unpacked and the 1b model is written
#                    (default /tmp/pagoda-gpu-check; the model takes about 2 GB)
#        BUNDLE_DIR  an unpacked bundle (a folder holding bin/, lib/, testdata/) to use
#                    instead of the archive (tools/gpu-bundle.sh dry-runs its stage so)
#        LIMITS      other step limits, e.g. LIMITS="tests=100 memcheck=125" for a rerun;
#                    refused when the plan would exceed the 540 s budget
# Exit status: 0 all passed; 1 a step failed; 2 bad arguments or no bundle; 3 no GPU here
# (tests ran and skipped, nothing measured).

# The step functions run through run_step ("step_$name"):
# shellcheck disable=SC2317
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DRY_RUN=${DRY_RUN:-0}
ARCHIVE=
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY_RUN=1; shift ;;
    -h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
    *) ARCHIVE=$1; shift ;;
  esac
done
ARCHIVE=${ARCHIVE:-$ROOT/gpu-bundle/pagoda-gpu-bundle.tar.xz}
WORK=${WORK:-/tmp/pagoda-gpu-check}
OUT=${OUT:-$WORK/out}
B=${BUNDLE_DIR:-$WORK/pagoda-gpu}
MODEL=$WORK/model-1b-bf16.gguf
RESULTS=$OUT/results.json
PARTS=$WORK/results.d  # JSON fragments, one object a line, joined into results.json
mkdir -p "$OUT" "$WORK"
LOG=$OUT/gpu-check.log
[ "$DRY_RUN" = 1 ] && LOG=$OUT/gpu-check-plan.txt

# ---- The plan. A step's limit bounds all it runs (`timeout` sends TERM 5 s before the
# limit, KILL at it); the start-up allowance covers what runs outside the steps: printing
# the commit, nvidia-smi (12 s at most) and writing results.json after each step.
BUDGET=540
STARTUP=20
STEPS=(unpack model tests kernels decode preempt memcheck)
declare -A LIMIT=([unpack]=45 [model]=60 [tests]=150 [kernels]=50 [decode]=66 [preempt]=90
                  [memcheck]=59)
for override in ${LIMITS:-}; do
  name=${override%%=*} value=${override#*=}
  if [ -z "${LIMIT[$name]:-}" ] || ! [[ $value =~ ^[0-9]+$ ]] || [ "$value" -lt 10 ]; then
    echo "gpu-check: LIMITS: $override is not STEP=SECONDS (>= 10) for a step of: ${STEPS[*]}" >&2
    exit 2
  fi
  LIMIT[$name]=$value
done
[ "${LIMIT[unpack]}" -ge 30 ] || { echo "gpu-check: LIMITS: unpack needs 30 s at least" >&2; exit 2; }
# NAME+graphs-off: binary NAME again with PAGODA_CUDA_GRAPHS=off (every engine and model test
# without CUDA graphs; the graph tests, which need them, filtered out).
CUDA_TESTS=(cuda_backend_test cuda_attention_test cuda_kv_dtype_test cuda_model_test
            cuda_model_test+graphs-off)
GRAPHS_OFF_FILTER='-*CudaRandomModelTest.*Graph*'

# memcheck: binary and --gtest_filter, run side by side under compute-sanitizer.
# The attention tests but the 64-batch sweep and the large shapes (head_dim 256, blocks of
# 256; the 8.6 GB cache of CudaLargeCacheTest is not matched either), the fp8 tensor-core
# cases, and the swap tests but the bf16 teacher-forced one (its swap copies are covered by
# the others; it runs hundreds of engine steps).
MEMCHECK=("cuda_attention_test *CudaAttention*:-CudaAttentionTest.BatchesOfOneToSixtyFourOnTheBenchmarkShape:CudaAttentionTest.HeadDim256AndBlocksOf64And256"
          "cuda_kv_dtype_test *Fp8OnTensorCores*"
          "cuda_model_test *CudaSwap*:-CudaSwapTest.Bf16SwappedRunTracksAnUnpreemptedRunTeacherForced")
# shellcheck disable=SC2054  # commas inside flag values
DECODE_ARGS=(--device=cuda --mode=batch --batch_sizes=1,16,64 --context=512 --decode_tokens=32)
PREEMPT_ARGS=(--device=cuda --mode=preempt --requests=64 --context=512 --decode_tokens=256)

# What a step runs, for the plan.
describe() {
  local s
  case $1 in
    unpack) echo "xz -dc ARCHIVE | tar -x into \$WORK (limit - 20 s); find libcublas*.so.13, libcuda.so.1 (20 s)" ;;
    model) echo "pagoda-decode-bench --write_model=$MODEL --preset=1b --dtype=bf16" ;;
    tests) echo "${CUDA_TESTS[*]} side by side (+graphs-off: PAGODA_CUDA_GRAPHS=off --gtest_filter=$GRAPHS_OFF_FILTER; a skip with a GPU present fails)" ;;
    kernels) echo "paged_attention_bench --json=\$WORK/paged_attention.json, then --kv_dtype=fp8 --json=\$WORK/paged_attention_fp8.json (half the limit each)" ;;
    decode) echo "pagoda-decode-bench --model=$MODEL ${DECODE_ARGS[*]}, then with --kv-cache-dtype=fp8, then with PAGODA_CUDA_GRAPHS=off (a third of the limit each)" ;;
    preempt) echo "pagoda-decode-bench --model=$MODEL ${PREEMPT_ARGS[*]}" ;;
    memcheck)
      for s in "${MEMCHECK[@]}"; do printf '%s --gtest_filter=%s; ' "${s%% *}" "${s#* }"; done
      echo "side by side under compute-sanitizer --tool memcheck (skipped when absent)" ;;
  esac
}

planned_total() {
  local s total=$STARTUP
  for s in "${STEPS[@]}"; do total=$((total + LIMIT[$s])); done
  echo "$total"
}

# Runs "$@" so that it ends within $1 seconds.
limited() {
  local limit=$1
  shift
  timeout -k 5 $((limit - 5)) "$@"
}

banner() { printf '\n==== %s (%s)\n' "$*" "$(date +%T)"; }

json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  s=${s//$'\r'/}
  s=${s//$'\n'/ }
  printf '"%s"' "$s"
}

# The lines of a fragment file as a JSON array, indented by $2 (default 2) spaces.
json_array() {
  if [ -s "$1" ]; then
    awk -v pad="$(printf '%*s' "${2:-2}" '')" '
      BEGIN { printf "[" } { printf "%s\n%s  %s", (NR > 1 ? "," : ""), pad, $0 } END { printf "\n%s]", pad }' "$1"
  else
    printf '[]'
  fi
}

# The contents of a JSON file, or null.
json_file() { if [ -s "$1" ]; then cat "$1"; else printf 'null'; fi; }

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
  found=$(timeout -k 1 5 find /usr /opt -name "$lib" -print -quit 2>/dev/null)
  if [ -n "$found" ]; then
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:${found%/*}
    export LD_LIBRARY_PATH
    return 0
  fi
  echo "$lib not found on this machine"
  return 1
}

# compute-sanitizer on PATH or in the usual CUDA folders; empty when absent.
find_sanitizer() {
  local s
  s=$(command -v compute-sanitizer 2>/dev/null) && { echo "$s"; return; }
  for s in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
    /usr/local/cuda-*/bin/compute-sanitizer; do
    [ -x "$s" ] && { echo "$s"; return; }
  done
}

# The commit line of a COMMIT file (first line), or "unknown".
commit_of() { if [ -s "$1" ]; then head -1 "$1"; else echo unknown; fi; }

# ---- Results: written again after every step, so an interrupted run still leaves one.
STATUS=running
write_results() {
  local tmp=$RESULTS.tmp
  {
    printf '{\n  "commit": %s,\n' "$(json_str "$COMMIT")"
    printf '  "bundle_commit": %s,\n' "$(json_str "$(commit_of "$B/COMMIT")")"
    printf '  "started": %s,\n' "$(json_str "$STARTED")"
    printf '  "device": %s,\n  "device_info": %s,\n' "$(json_str "$DEVICE")" "$(json_str "$DEVICE_INFO")"
    printf '  "have_gpu": %s,\n  "cores": %s,\n' "$([ "$HAVE_GPU" = 1 ] && echo true || echo false)" "$(nproc)"
    printf '  "status": %s,\n' "$(json_str "$STATUS")"
    printf '  "budget_s": %d,\n  "planned_s": %d,\n  "elapsed_s": %d,\n' "$BUDGET" "$(planned_total)" "$SECONDS"
    printf '  "steps": %s,\n' "$(json_array "$PARTS/steps")"
    printf '  "tests": %s,\n' "$(json_array "$PARTS/tests")"
    printf '  "memcheck": {\n    "tool": %s,\n    "note": %s,\n    "runs": %s\n  },\n' \
      "$(json_str "${SANITIZER:-}")" "$(json_str "${MEMCHECK_NOTE:-}")" "$(json_array "$PARTS/memcheck" 4)"
    printf '  "paged_attention": %s,\n' "$(json_file "$WORK/paged_attention.json")"
    printf '  "paged_attention_fp8": %s,\n' "$(json_file "$WORK/paged_attention_fp8.json")"
    printf '  "decode": %s,\n' "$(json_file "$WORK/decode.json")"
    printf '  "decode_fp8": %s,\n' "$(json_file "$WORK/decode_fp8.json")"
    printf '  "decode_graphs_off": %s,\n' "$(json_file "$WORK/decode_graphs_off.json")"
    printf '  "preempt": %s\n}\n' "$(json_file "$WORK/preempt.json")"
  } >"$tmp" && mv "$tmp" "$RESULTS"
}

# Records one step: name, status (ok, failed, timeout, skipped), exit code, seconds, note.
record_step() {
  printf '{"name": %s, "limit_s": %d, "seconds": %d, "exit": %d, "status": %s, "note": %s}\n' \
    "$(json_str "$1")" "${LIMIT[$1]}" "$4" "$3" "$(json_str "$2")" "$(json_str "${5:-}")" \
    >>"$PARTS/steps"
  write_results
}

# Runs step $1 (function step_$1) and records it; returns its status.
run_step() {
  local name=$1 start=$SECONDS rc=0
  banner "step $name (limit ${LIMIT[$name]} s): $(describe "$name")"
  STEP_NOTE=
  "step_$name" || rc=$?
  local state=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    state=timeout
  elif [ $rc -eq 200 ]; then
    state=skipped rc=0
  elif [ "$rc" -ne 0 ]; then
    state=failed
  fi
  echo "---- $name: $state ($((SECONDS - start)) s of ${LIMIT[$name]})${STEP_NOTE:+: $STEP_NOTE}"
  record_step "$name" "$state" "$rc" $((SECONDS - start)) "$STEP_NOTE"
  [ "$state" = ok ] || [ "$state" = skipped ]
}

skip() { STEP_NOTE=$1; return 200; }

# Pass/fail/skip counts of a gtest log as one JSON object.
gtest_json() {  # binary log exit [filter]
  awk -v bin="$1" -v rc="$3" -v filter="${4:-}" '
    /^\[       OK \] /                      { ok++ }
    /^\[  FAILED  \] .*\([0-9]+ ms\)$/      { n = $4; sub(/,$/, "", n); failed[nf++] = n }
    /^\[  SKIPPED \] .*\([0-9]+ ms\)$/      { skipped++ }
    /ERROR SUMMARY: [0-9]+ error/           { errors = $4 + 0; have_errors = 1 }
    END {
      printf "{\"binary\": \"%s\", \"exit\": %d, \"timed_out\": %s, \"passed\": %d, \"failed\": %d, \"skipped\": %d", \
        bin, rc, (rc == 124 || rc == 137) ? "true" : "false", ok, nf, skipped
      if (filter != "") printf ", \"filter\": \"%s\"", filter
      if (have_errors) printf ", \"memcheck_errors\": %d", errors
      printf ", \"failed_tests\": ["
      for (i = 0; i < nf; i++) printf "%s\"%s\"", (i ? ", " : ""), failed[i]
      printf "]}\n"
    }' "$2"
}

# Prints the tests a binary would run (one full name a line) with an optional filter.
list_tests() {
  local bin=$1 filter=${2:-}
  PAGODA_TESTDATA_DIR=$B/testdata timeout -k 2 20 "$B/bin/$bin" --gtest_list_tests \
    ${filter:+"--gtest_filter=$filter"} |
    awk '/^[^ ]/ { suite = $1; next } /^  [^ ]/ { print suite $1 }'
}

# ---- The steps. Each returns 0 (ok), 124/137 (its limit), 200 (skipped) or another failure.
step_unpack() {
  if [ -n "${BUNDLE_DIR:-}" ]; then
    echo "using the unpacked bundle $B"
  else
    [ -f "$ARCHIVE" ] || { STEP_NOTE="no archive at $ARCHIVE: run tools/gpu-bundle.sh first"; return 2; }
    rm -rf "$B"
    if command -v xz >/dev/null; then
      # shellcheck disable=SC2016  # $1 and $2 are the inner shell's
      limited $((LIMIT[unpack] - 20)) sh -c 'xz -dc "$1" | tar -C "$2" -xf -' _ "$ARCHIVE" "$WORK" ||
        { STEP_NOTE="cannot unpack $ARCHIVE"; return 1; }
    else  # no xz there: Python's lzma reads the same archive
      limited $((LIMIT[unpack] - 20)) python3 -c \
        'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$ARCHIVE" "$WORK" || { STEP_NOTE="cannot unpack $ARCHIVE (no xz, python3 failed)"; return 1; }
    fi
  fi
  [ -d "$B/bin" ] || { STEP_NOTE="$B/bin missing"; return 2; }
  local bundle_commit
  bundle_commit=$(commit_of "$B/COMMIT")
  echo "bundle built from: $bundle_commit"
  if [ "$COMMIT" != unknown ] && [ "$bundle_commit" != "$COMMIT" ]; then
    echo "WARNING: the bundle's COMMIT differs from the one beside the archive ($COMMIT)"
  fi
  [ "$COMMIT" = unknown ] && COMMIT=$bundle_commit
  export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local missing=0
  find_library libcublas.so.13 || missing=1
  find_library libcublasLt.so.13 || missing=1
  [ "$HAVE_GPU" = 1 ] && { find_library libcuda.so.1 || missing=1; }
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  if ldd "$B/bin/cuda_backend_test" | grep 'not found'; then
    STEP_NOTE="libraries missing: the binaries cannot start"
    return 1
  fi
  [ "$missing" -eq 0 ] || { STEP_NOTE="a CUDA library is missing"; return 1; }
}

step_model() {
  [ "$HAVE_GPU" = 1 ] || { skip "no GPU: nothing is measured"; return; }
  rm -f "$MODEL"
  limited "${LIMIT[model]}" "$B/bin/pagoda-decode-bench" --write_model="$MODEL" --preset=1b \
    --dtype=bf16 || return
  ls -l "$MODEL"
}

# The four CUDA test binaries side by side; fails on a failure, or on a skip when a GPU is
# present (a skip there means the device was not usable).
step_tests() {
  local status=0 t pids=() i=0
  for t in "${CUDA_TESTS[@]}"; do
    if [ "${t%+graphs-off}" != "$t" ]; then
      PAGODA_CUDA_GRAPHS=off PAGODA_TESTDATA_DIR=$B/testdata limited "${LIMIT[tests]}" \
        "$B/bin/${t%+graphs-off}" --gtest_color=no --gtest_filter="$GRAPHS_OFF_FILTER" \
        >"$WORK/$t.log" 2>&1 &
    else
      PAGODA_TESTDATA_DIR=$B/testdata limited "${LIMIT[tests]}" "$B/bin/$t" --gtest_color=no \
        >"$WORK/$t.log" 2>&1 &
    fi
    pids+=($!)
  done
  for t in "${CUDA_TESTS[@]}"; do
    local rc=0 skipped
    wait "${pids[$i]}" || rc=$?
    i=$((i + 1))
    gtest_json "$t" "$WORK/$t.log" "$rc" >>"$PARTS/tests"
    skipped=$(grep -cE '^\[  SKIPPED \] .*\(' "$WORK/$t.log")
    grep -E '^\[  (PASSED|FAILED)  \] [0-9]|^\[==========\] [0-9]+ tests? from .* ran' "$WORK/$t.log" |
      sed "s/^/$t: /"
    echo "$t: exit $rc, $skipped skipped"
    if [ "$rc" -ne 0 ]; then
      [ "$status" -eq 0 ] && status=$rc
      cp "$WORK/$t.log" "$OUT/$t.log"  # the whole log comes back too
      echo "---- $t failures (whole log: \$OUT/$t.log):"
      grep -E -B2 -A12 'Failure|FAILED|Skipped|Timeout' "$WORK/$t.log" | head -200
    elif [ "$HAVE_GPU" = 1 ] && [ "$skipped" -gt 0 ]; then
      status=1
      grep -A1 'Skipped' "$WORK/$t.log" | head -6
    fi
  done
  return "$status"
}

# The bf16 cache's table, then the fp8 cache's, each within half the step's limit.
step_kernels() {
  [ "$HAVE_GPU" = 1 ] || { skip "no GPU: nothing is measured"; return; }
  local rc=0 r half=$((LIMIT[kernels] / 2))
  limited "$half" "$B/bin/paged_attention_bench" --json="$WORK/paged_attention.json" || rc=$?
  limited "$half" "$B/bin/paged_attention_bench" --kv_dtype=fp8 \
    --json="$WORK/paged_attention_fp8.json" || { r=$?; [ "$rc" -eq 0 ] && rc=$r; }
  return "$rc"
}

# The decode benchmark's table as JSON (rows "seqs tok/s ratio", and its "cuda graphs:" line
# as graph_counts, null without one); $2 names the KV type, $3 whether CUDA graphs were on.
decode_json() {
  awk -v dev="$DEVICE" -v kv="$2" -v graphs="$3" 'BEGIN { printf "{\n    \"device\": \"%s\",\n    \"preset\": \"1b\",\n    \"dtype\": \"bf16\",\n    \"kv_cache_dtype\": \"%s\",\n    \"cuda_graphs\": \"%s\",\n    \"context\": 512,\n    \"rows\": [", dev, kv, graphs; n = 0 }
    /^ *[0-9]+ +[0-9.]+ +[0-9.]+ *$/ { printf "%s\n      {\"seqs\": %d, \"decode_tok_s\": %s, \"vs_1_seq\": %s}", (n++ ? "," : ""), $1, $2, $3 }
    /^cuda graphs: [0-9]+ captures, [0-9]+ replays, [0-9]+ direct runs, [0-9]+ failed captures$/ {
      counts = sprintf("{\"captures\": %d, \"replays\": %d, \"direct\": %d, \"failed\": %d}", $3, $5, $7, $10)
    }
    END { printf "\n    ],\n    \"graph_counts\": %s\n  }\n", (counts == "" ? "null" : counts) }' "$1"
}

# The preemption table as JSON: rows "name... wall_s tok/s ttft preemptions swap-outs hits".
preempt_json() {
  awk 'function num(s) { return s ~ /^[0-9]+(\.[0-9]+)?$/ }
    BEGIN { n = 0 }
    /^model: / { cfg = $0; gsub(/["\\]/, "", cfg) }
    NF >= 7 && num($NF) && num($(NF-1)) && num($(NF-2)) && num($(NF-3)) && num($(NF-4)) && num($(NF-5)) {
      name = $1; for (i = 2; i <= NF - 6; i++) name = name " " $i
      gsub(/["\\]/, "", name)
      row[n++] = sprintf("{\"preemption\": \"%s\", \"wall_s\": %s, \"out_tok_s\": %s, \"ttft_p50_ms\": %s, \"preemptions\": %s, \"swap_outs\": %s, \"cache_hits\": %s}", name, $(NF-5), $(NF-4), $(NF-3), $(NF-2), $(NF-1), $NF)
    }
    END {
      printf "{\n    \"config\": \"%s\",\n    \"rows\": [", cfg
      for (i = 0; i < n; i++) printf "%s\n      %s", (i ? "," : ""), row[i]
      print "\n    ]\n  }"
    }' "$1"
}

step_decode() {
  [ "$HAVE_GPU" = 1 ] || { skip "no GPU: nothing is measured"; return; }
  [ -s "$MODEL" ] || { STEP_NOTE="no model (the model step failed)"; return 1; }
  local rc=0 r third=$((LIMIT[decode] / 3)) run kv graphs name
  for run in bf16:on fp8:on bf16:off; do
    kv=${run%:*} graphs=${run#*:} name=decode
    [ "$kv" = fp8 ] && name=decode_fp8
    [ "$graphs" = off ] && name=decode_graphs_off
    PAGODA_CUDA_GRAPHS=$graphs limited "$third" "$B/bin/pagoda-decode-bench" --model="$MODEL" \
      "${DECODE_ARGS[@]}" --kv-cache-dtype="$kv" | tee "$WORK/$name.txt" ||
      { r=$?; [ "$rc" -eq 0 ] && rc=$r; }
    decode_json "$WORK/$name.txt" "$kv" "$graphs" >"$WORK/$name.json"
  done
  return "$rc"
}

step_preempt() {
  [ "$HAVE_GPU" = 1 ] || { skip "no GPU: nothing is measured"; return; }
  [ -s "$MODEL" ] || { STEP_NOTE="no model (the model step failed)"; return 1; }
  local rc=0
  limited "${LIMIT[preempt]}" "$B/bin/pagoda-decode-bench" --model="$MODEL" "${PREEMPT_ARGS[@]}" |
    tee "$WORK/preempt.txt" || rc=$?
  preempt_json "$WORK/preempt.txt" >"$WORK/preempt.json"
  return "$rc"
}

step_memcheck() {
  if [ -z "$SANITIZER" ]; then
    MEMCHECK_NOTE="compute-sanitizer not found (PATH, /usr/local/cuda*/bin): memcheck skipped"
    echo "$MEMCHECK_NOTE"
    skip "$MEMCHECK_NOTE"
    return
  fi
  [ "$HAVE_GPU" = 1 ] || { MEMCHECK_NOTE="no GPU"; skip "no GPU: memcheck needs a device"; return; }
  MEMCHECK_NOTE="compute-sanitizer --tool memcheck"
  local status=0 spec pids=() i=0
  for spec in "${MEMCHECK[@]}"; do
    local t=${spec%% *} filter=${spec#* }
    PAGODA_TESTDATA_DIR=$B/testdata limited "${LIMIT[memcheck]}" "$SANITIZER" --tool memcheck \
      --error-exitcode 99 --print-limit 50 "$B/bin/$t" --gtest_color=no \
      --gtest_filter="$filter" >"$WORK/memcheck-$t.log" 2>&1 &
    pids+=($!)
  done
  for spec in "${MEMCHECK[@]}"; do
    local t=${spec%% *} filter=${spec#* } rc=0
    wait "${pids[$i]}" || rc=$?
    i=$((i + 1))
    gtest_json "$t" "$WORK/memcheck-$t.log" "$rc" "$filter" >>"$PARTS/memcheck"
    echo "$t ($filter): exit $rc; $(grep -E 'ERROR SUMMARY' "$WORK/memcheck-$t.log" | tail -1)"
    grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$WORK/memcheck-$t.log" | sed "s/^/$t: /"
    if [ "$rc" -ne 0 ]; then
      [ "$status" -eq 0 ] && status=$rc
      cp "$WORK/memcheck-$t.log" "$OUT/memcheck-$t.log"
      echo "---- $t under memcheck (whole log: \$OUT/memcheck-$t.log):"
      grep -E -A8 '^========= (Invalid|Uninitialized|Program hit|Leaked|Error)|FAILED' \
        "$WORK/memcheck-$t.log" | head -120
    fi
  done
  return "$status"
}

# A device call returns at most 8 files: at the end every log and benchmark output goes into
# $OUT/logs.tar.gz, and the failing binaries' logs copied to $OUT on the way (so that a run cut
# short still returns them) are removed, leaving results.json, gpu-check.log and the archive.
pack_logs() {
  local files
  files=$(cd "$WORK" && ls -- *.log *.txt *.json 2>/dev/null) || true
  [ -n "$files" ] || return 0
  # shellcheck disable=SC2086  # one name a word (the names are the script's own)
  if tar -C "$WORK" -czf "$OUT/logs.tar.gz" $files; then
    find "$OUT" -maxdepth 1 -name '*.log' ! -name gpu-check.log -delete
    echo "logs: $OUT/logs.tar.gz ($(wc -w <<<"$files") files)"
  fi
}

# ---- The dry run: the plan and every test, nothing run.
print_plan() {
  local s n=0
  printf '%-3s %-9s %7s  %s\n' "#" step "limit" command
  printf '%-3s %-9s %6ss  %s\n' - start-up "$STARTUP" \
    "commit, nvidia-smi (12 s at most), results.json after each step (allowance)"
  for s in "${STEPS[@]}"; do
    n=$((n + 1))
    printf '%-3s %-9s %6ss  %s\n' "$n" "$s" "${LIMIT[$s]}" "$(describe "$s")"
  done
  echo "total: $(planned_total) s of the $BUDGET s budget (a device command may run 600 s)"
}

dry_run() {
  echo "commit: $COMMIT"
  banner "gpu-check dry run: the plan; nothing runs but the binaries' --gtest_list_tests"
  print_plan
  if [ -z "${BUNDLE_DIR:-}" ] && [ -f "$ARCHIVE" ]; then
    rm -rf "$B"
    xz -dc "$ARCHIVE" | tar -C "$WORK" -xf - || { echo "cannot unpack $ARCHIVE"; return 2; }
  fi
  [ -d "$B/bin" ] || { echo "no bundle at $B (no archive at $ARCHIVE): cannot list the tests"; return 2; }
  echo "bundle: $B, built from $(commit_of "$B/COMMIT")"
  export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  find_library libcublas.so.13 >/dev/null
  find_library libcublasLt.so.13 >/dev/null
  echo "compute-sanitizer: ${SANITIZER:-not found (the memcheck step will be skipped)}"
  local t spec status=0 names n
  for t in "${CUDA_TESTS[@]}"; do
    if [ "${t%+graphs-off}" != "$t" ]; then
      names=$(list_tests "${t%+graphs-off}" "$GRAPHS_OFF_FILTER")
    else
      names=$(list_tests "$t")
    fi || { echo "$t: cannot list its tests"; status=1; continue; }
    banner "step tests: $t, $(grep -c . <<<"$names") tests"
    while read -r n; do echo "  $n"; done <<<"$names"
  done
  for spec in "${MEMCHECK[@]}"; do
    t=${spec%% *}
    names=$(list_tests "$t" "${spec#* }") || { echo "$t: cannot list its tests"; status=1; continue; }
    banner "step memcheck: $t --gtest_filter=${spec#* }, $(grep -c . <<<"$names") tests"
    while read -r n; do echo "  $n"; done <<<"$names"
  done
  banner "dry run: $([ $status -eq 0 ] && echo OK || echo FAILED)"
  return "$status"
}

main() {
  if [ "$(planned_total)" -gt "$BUDGET" ]; then
    print_plan
    echo "gpu-check: the plan takes $(planned_total) s, over the $BUDGET s budget: lower LIMITS"
    return 2
  fi
  STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  # The commit first: beside the archive (tools/gpu-bundle.sh writes it there and into the
  # bundle), or in the unpacked bundle.
  COMMIT=$(commit_of "$(dirname "$ARCHIVE")/COMMIT")
  [ "$COMMIT" = unknown ] && [ -n "${BUNDLE_DIR:-}" ] && COMMIT=$(commit_of "$B/COMMIT")
  SANITIZER=$(find_sanitizer)
  if [ "$DRY_RUN" = 1 ]; then
    dry_run
    return
  fi
  echo "commit: $COMMIT"
  local status=0
  rm -rf "$PARTS"
  mkdir -p "$PARTS"
  rm -f "$WORK"/*.json "$WORK"/*.txt "$WORK"/*.log "$OUT/logs.tar.gz"
  banner "gpu-check in $ROOT, archive $ARCHIVE; plan:"
  print_plan
  HAVE_GPU=0
  DEVICE=none
  DEVICE_INFO=
  local smi
  # nvidia-smi fails (and prints "No devices were found") without a usable device.
  if command -v nvidia-smi >/dev/null &&
    smi=$(timeout -k 2 10 nvidia-smi \
      --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem \
      --format=csv,noheader 2>/dev/null); then
    DEVICE_INFO=$(head -1 <<<"$smi")
  fi
  if [[ $DEVICE_INFO == *,* ]]; then
    HAVE_GPU=1
    DEVICE=${DEVICE_INFO%%,*}
    echo "GPU: $DEVICE_INFO (name, memory, driver, max SM clock, max memory clock)"
  else
    echo "no GPU here (nvidia-smi missing or found no device): tests will skip, nothing is measured"
  fi
  echo "cores: $(nproc)"
  write_results

  if ! run_step unpack; then
    status=1
    if [ ! -d "$B/bin" ]; then
      STATUS=failed
      write_results
      banner "done: FAILED (no usable bundle)"
      return 1
    fi
  fi
  local s
  for s in "${STEPS[@]:1}"; do
    run_step "$s" || status=1
  done
  if [ $status -ne 0 ]; then
    STATUS=failed
  elif [ "$HAVE_GPU" != 1 ]; then
    STATUS=no_gpu
  else
    STATUS=ok
  fi
  write_results
  pack_logs
  echo "results: $RESULTS ($SECONDS s in all)"
  if [ $status -ne 0 ]; then
    banner "done: FAILURES above$([ "$HAVE_GPU" = 1 ] || echo ' (and no GPU)')"
    return 1
  fi
  if [ "$HAVE_GPU" != 1 ]; then
    banner "done: NO GPU (tests skipped; benchmarks not run)"
    return 3
  fi
  banner "done: OK"
  return 0
}

main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
