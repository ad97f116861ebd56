#!/usr/bin/env bash
# gpu-check: the whole CUDA check on a GPU machine in one command (about 5 minutes on an
# H200 with 16 cores). Builds the CUDA backend for sm_90 in build-gpu/, runs the CUDA tests
# against the CPU reference, the paged-attention bandwidth benchmark and the end-to-end
# decode benchmark, and prints everything; with $OUT set, a copy goes to $OUT/gpu-check.log.
#
# Usage: tools/gpu-check.sh            (from anywhere; works in the repository root)
# Env:   BUILD_DIR (default build-gpu), CUDA_ARCH (default 90), JOBS (default nproc)
set -uo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
CUDA_ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
LOG=/dev/null
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  LOG="$OUT/gpu-check.log"
fi

step() { printf '\n==== %s (%s)\n' "$*" "$(date +%T)"; }

main() {
  local status=0
  step "gpu-check in $(pwd)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv ||
    echo "nvidia-smi failed"
  nvcc --version | tail -1 || true

  if ! command -v cmake >/dev/null || ! dpkg-query -W libabsl-dev >/dev/null 2>&1; then
    step "installing dependencies"
    scripts/install-deps.sh || echo "install-deps failed; trying the build anyway"
  fi
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)

  step "configure $BUILD_DIR (CUDA arch $CUDA_ARCH)"
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DPAGODA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DCMAKE_BUILD_TYPE=Release || return 1

  step "build CUDA tests and benchmarks (-j$JOBS)"
  cmake --build "$BUILD_DIR" -j"$JOBS" --target cuda_backend_test cuda_attention_test \
    cuda_model_test paged_attention_bench || return 1

  step "CUDA tests"
  # Test names are the gtest names (CudaOpsTest..., AttentionPlanTest...): match both cases.
  ctest --test-dir "$BUILD_DIR" -R "[Cc]uda|AttentionPlan" --output-on-failure -j4 \
    --timeout 300 || status=1

  step "paged-attention decode bandwidth"
  "$BUILD_DIR"/bin/paged_attention_bench || status=1

  step "end-to-end decode benchmark"
  if cmake --build "$BUILD_DIR" -j"$JOBS" --target pagoda-decode-bench; then
    "$BUILD_DIR"/bin/pagoda-decode-bench --device cuda --preset 1b --dtype bf16 \
      --batch-sizes 1,16,64 --context 512 || status=1
  else
    echo "pagoda-decode-bench did not build; skipped"
    status=1
  fi

  step "done: $([ $status -eq 0 ] && echo OK || echo FAILURES above)"
  return $status
}

main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
