#!/usr/bin/env bash
# Runs every fuzz target for a fixed number of inputs from its seed corpus (deterministic
# -seed=1), as `make clang-checks` and CI do. New inputs go to BUILD_DIR/fuzz/work/<target>
# (the committed corpus is only read); a crash leaves BUILD_DIR/fuzz/artifacts/<target>-*
# and fails the script.
# Usage: fuzz/run_fuzzers.sh BUILD_DIR [RUNS] [TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
runs=${2:-20000}
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(gguf_fuzzer tokenizer_spm_fuzzer tokenizer_bpe_fuzzer request_fuzzer sampler_fuzzer
    chat_template_fuzzer grammar_fuzzer grammar_shape_fuzzer openai_body_fuzzer)
fi

# Longest input per target: whole seeds fit (the GGUF seeds go up to 16 KiB).
max_len() {
  case $1 in
    gguf_fuzzer) echo 20000 ;;
    request_fuzzer) echo 2048 ;;
    chat_template_fuzzer) echo 8192 ;;
    grammar_fuzzer) echo 4096 ;;
    grammar_shape_fuzzer) echo 512 ;;
    openai_body_fuzzer) echo 2048 ;;
    *) echo 1024 ;;
  esac
}

# Per-input caps (libFuzzer's -timeout in seconds of one input, -rss_limit_mb): the grammar
# targets hold every input to what a request's grammar may cost, far below the others'.
limits() {
  case $1 in
    grammar_fuzzer | grammar_shape_fuzzer) echo "-timeout=10 -rss_limit_mb=2048" ;;
    *) echo "-timeout=60 -rss_limit_mb=4096" ;;
  esac
}

failed=0
for t in "${targets[@]}"; do
  work=$build/fuzz/work/$t
  rm -rf "$work" && mkdir -p "$work" "$build/fuzz/artifacts"
  log=$build/fuzz/$t.log
  start=$(date +%s%N)
  # shellcheck disable=SC2046  # limits() is two words on purpose
  if "$build/fuzz/$t" -runs="$runs" -seed=1 -max_len="$(max_len "$t")" $(limits "$t") \
      -print_final_stats=1 \
      -artifact_prefix="$build/fuzz/artifacts/$t-" "$work" "$root/fuzz/corpus/$t" \
      > "$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed=1
  fi
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  printf '%-22s %-6s %8s inputs %5d.%01d s  %s\n' "$t" "$status" "${execs:-?}" $((ms / 1000)) \
    $((ms % 1000 / 100)) "$cov"
  if [ $status = FAILED ]; then tail -40 "$log"; fi
done
exit $failed
