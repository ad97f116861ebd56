#!/usr/bin/env bash
# gpu-bundle: packs the CUDA tests and benchmarks, every shared library they need except
# glibc's and CUDA's (driver, cuBLAS), and the test data they read into one archive that a
# bare GPU machine runs with tools/gpu-check.sh, no build there (docs/GPU.md). Then checks
# it: each bundled binary runs under `env -i` with only the bundle on LD_LIBRARY_PATH (CUDA
# tests skip without a device), no library resolves outside the bundle but glibc's and
# CUDA's, the CUDA runtime is linked statically, device code exists for sm_80 and sm_90,
# `tools/gpu-check.sh --dry-run` on the staged bundle prints its plan within the time budget
# and lists every CUDA test, and the working tree plus the archive stay under the 64 MiB a
# device call carries. The commit the binaries were built from (`git rev-parse HEAD`, plus
# "-dirty" when the tree has changes) goes into the bundle and beside the archive as COMMIT.
#
# Usage: tools/gpu-bundle.sh [--build-dir DIR] [--out DIR] [--no-build]
#   --build-dir DIR  build folder (default build-gpu). Configured here when it has no
#                    CMakeCache.txt: Release, -DPAGODA_CUDA=ON, CUDA architectures 80;90.
#                    An existing CUDA build (RelWithDebInfo or Release) is reused as it is.
#   --out DIR        where the archive goes (default gpu-bundle/, ignored by git): the
#                    folder to name in the device call's `carry`.
#   --no-build       use the binaries already in the build folder (ctest's GpuBundle test).
# Env: JOBS (build parallelism, default nproc), BUNDLE_XZ (xz level, default 9).
# Exit status 0 only when the bundle was made and every check passed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$ROOT/build-gpu
OUT_DIR=$ROOT/gpu-bundle
BUILD=1
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --out) OUT_DIR=$(realpath -m "$2"); shift 2 ;;
    --no-build) BUILD=0; shift ;;
    *) echo "gpu-bundle: unknown argument $1" >&2; exit 2 ;;
  esac
done

# What goes in: binaries (build-relative paths) and test data (testdata-relative globs).
BINARIES=(tests/cuda_backend_test tests/cuda_attention_test tests/cuda_kv_dtype_test
          tests/cuda_model_test bin/paged_attention_bench bin/pagoda-decode-bench)
TARGETS=(cuda_backend_test cuda_attention_test cuda_kv_dtype_test cuda_model_test
         paged_attention_bench pagoda-decode-bench)
TESTDATA=('stories260K*.gguf' 'stories260K*.golden.json' 'quant_ref/qref-*.gguf')
# Libraries the GPU machine provides: glibc's and CUDA's (the driver and cuBLAS).
SYSTEM_LIBS='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so)'
CUDA_LIBS='^(libcuda\.so|libcublas\.so|libcublasLt\.so)'
LIMIT=$((64 * 1024 * 1024))
ARCHIVE_NAME=pagoda-gpu-bundle.tar.xz

fail() { echo "gpu-bundle: FAILED: $*" >&2; exit 1; }
note() { echo "gpu-bundle: $*"; }

# The commit of the working tree: HEAD, "-dirty" when a tracked file differs from it or an
# untracked, not ignored file exists (what the build compiled may then not be HEAD).
commit_id() {
  local head
  head=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null) || { echo unknown; return; }
  if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=normal 2>/dev/null | head -1)" ]; then
    head=$head-dirty
  fi
  echo "$head"
}

configure_and_build() {
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    local launcher=()
    command -v ccache >/dev/null &&
      launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    local generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S "$ROOT" -B "$BUILD_DIR" "${generator[@]}" "${launcher[@]}" \
      -DCMAKE_BUILD_TYPE=Release -DPAGODA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="80;90"
  fi
  cmake --build "$BUILD_DIR" -j"${JOBS:-$(nproc)}" --target "${TARGETS[@]}"
}

# Fails unless the build folder is a CUDA build for sm_80 and sm_90, not Debug.
check_build_dir() {
  local cache=$BUILD_DIR/CMakeCache.txt
  [ -f "$cache" ] || fail "$BUILD_DIR is not configured"
  grep -q '^CMAKE_BUILD_TYPE:STRING=Debug$' "$cache" && fail "$BUILD_DIR is a Debug build"
  local rules
  rules=$(cat "$BUILD_DIR"/build.ninja "$BUILD_DIR"/kernels/cuda/CMakeFiles/*/flags.make \
    2>/dev/null || true)
  grep -qE 'sm_80' <<<"$rules" || fail "$BUILD_DIR builds no sm_80 device code"
  grep -qE 'sm_90a?' <<<"$rules" || fail "$BUILD_DIR builds no sm_90 device code"
  for b in "${BINARIES[@]}"; do
    [ -x "$BUILD_DIR/$b" ] || fail "$BUILD_DIR/$b is missing (build it, or drop --no-build)"
  done
}

# Copies the binaries, their non-system libraries and the test data into $STAGE.
assemble() {
  rm -rf "$STAGE"
  mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/testdata"
  for b in "${BINARIES[@]}"; do
    cp "$BUILD_DIR/$b" "$STAGE/bin/"
    while read -r name path; do
      [ -n "$path" ] || continue
      grep -qE "$SYSTEM_LIBS|$CUDA_LIBS" <<<"$name" && continue
      [[ $name == libcudart.so* ]] && fail "$b links the shared CUDA runtime; configure with CMAKE_CUDA_RUNTIME_LIBRARY=Static"
      [ "$path" = "not" ] && fail "$b: $name not found here"
      [ -f "$STAGE/lib/$name" ] || cp -L "$path" "$STAGE/lib/$name"
    done < <(ldd "$BUILD_DIR/$b" | awk '$2 == "=>" {print $1, $3}')
  done
  local data=$BUILD_DIR/testdata
  (
    cd "$data" || exit 1
    shopt -s nullglob
    for pattern in "${TESTDATA[@]}"; do
      # shellcheck disable=SC2206
      local files=($pattern)
      [ ${#files[@]} -gt 0 ] || { echo "gpu-bundle: no test data matches $pattern in $data" >&2; exit 1; }
      cp --parents "${files[@]}" "$STAGE/testdata/"
    done
  ) || fail "test data missing in $data (configure unpacks tests/data there)"
  chmod -R u+w "$STAGE"
  strip --strip-unneeded "$STAGE"/bin/* "$STAGE"/lib/*
  commit_id >"$STAGE/COMMIT"
  note "commit: $(cat "$STAGE/COMMIT")"
}

# Every library a bundled binary loads resolves inside the bundle, or is glibc's or CUDA's.
check_closure() {
  local bad=0
  for b in "$STAGE"/bin/*; do
    while read -r name path; do
      if [ "$path" = "not" ]; then
        grep -qE "$CUDA_LIBS" <<<"$name" && continue  # the GPU machine provides it
        echo "  $(basename "$b"): $name not found" >&2; bad=1; continue
      fi
      [[ $path == "$STAGE"/lib/* ]] && continue
      grep -qE "$SYSTEM_LIBS|$CUDA_LIBS" <<<"$name" && continue
      echo "  $(basename "$b"): $name resolves outside the bundle ($path)" >&2; bad=1
    done < <(env -i LD_LIBRARY_PATH="$STAGE/lib" ldd "$b" | awk '$2 == "=>" {print $1, $3}')
  done
  [ $bad -eq 0 ] || fail "library closure"
  note "libraries: every one resolves in the bundle or is glibc's / CUDA's"
}

# Runs each bundled binary with an empty environment: tests pass or skip, the benchmarks
# start (the decode benchmark runs a tiny CPU model; the kernel one needs a device).
check_runs() {
  local run=(env -i LD_LIBRARY_PATH="$STAGE/lib" PAGODA_TESTDATA_DIR="$STAGE/testdata")
  local log=$STAGE.log
  for t in cuda_backend_test cuda_attention_test cuda_kv_dtype_test cuda_model_test; do
    "${run[@]}" "$STAGE/bin/$t" >"$log" 2>&1 || { tail -30 "$log" >&2; fail "$t under env -i"; }
    note "$t: $(grep -E '^\[  PASSED  \]' "$log" | grep -oE '[0-9]+' | head -1) passed," \
      "$(grep -cE '^\[  SKIPPED \] .*\(' "$log") skipped (no device)"
  done
  "${run[@]}" "$STAGE/bin/pagoda-decode-bench" --device=cpu --preset=tiny --mode=batch \
    --batch_sizes=1 --context=8 --decode_tokens=2 --threads=1 >"$log" 2>&1 ||
    { cat "$log" >&2; fail "pagoda-decode-bench under env -i"; }
  note "pagoda-decode-bench: runs (CPU, tiny preset)"
  # With the flags gpu-check.sh gives it (they are parsed before the device is looked for).
  local rc flags
  for flags in "" "--kv_dtype=fp8 --json=$STAGE.json"; do
    rc=0
    # shellcheck disable=SC2086  # the flags split into words
    "${run[@]}" "$STAGE/bin/paged_attention_bench" $flags >"$log" 2>&1 || rc=$?
    if [ $rc -ne 0 ] && ! grep -q "no CUDA device" "$log"; then
      cat "$log" >&2; fail "paged_attention_bench $flags under env -i (exit $rc)"
    fi
    note "paged_attention_bench ${flags:-(no flags)}: starts ($( [ $rc -eq 0 ] && echo ran || echo 'no device here'))"
  done
  rm -f "$STAGE.json"
  rm -f "$log"
}

# gpu-check's dry run on the staged bundle: the plan fits the time budget and every test
# binary lists its tests (the plan and the lists go to gpu-check-plan.txt beside the archive).
check_plan() {
  local work plan=$OUT_DIR/gpu-check-plan.txt
  work=$(mktemp -d)
  mkdir -p "$OUT_DIR"
  if ! BUNDLE_DIR=$STAGE WORK=$work OUT=$work/out "$ROOT/tools/gpu-check.sh" --dry-run \
    >"$plan" 2>&1; then
    cat "$plan" >&2
    rm -rf "$work"
    fail "tools/gpu-check.sh --dry-run on the bundle"
  fi
  rm -rf "$work"
  grep -E '^(total:|[0-9-] +[a-z-]+ +[0-9]+s )' "$plan" | sed 's/^/gpu-bundle:   /'
  note "gpu-check dry run: $(grep -cE '^  [^ ]' "$plan") test names listed ($plan)"
}

# The archive, and the size of everything a device call carries.
pack_and_measure() {
  mkdir -p "$OUT_DIR"
  local archive=$OUT_DIR/$ARCHIVE_NAME
  rm -f "$archive"
  tar -C "$(dirname "$STAGE")" -cf - "$(basename "$STAGE")" | xz -"${BUNDLE_XZ:-9}" -T1 >"$archive"
  local bundle tree
  bundle=$(du -cb "$OUT_DIR" | tail -1 | cut -f1)
  if git -C "$ROOT" rev-parse >/dev/null 2>&1; then
    # What travels besides carried paths: tracked and untracked-not-ignored files (a tracked
    # file deleted in the working tree does not travel: stat skips it, and its failure is not
    # one of ours).
    tree=$(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
      { xargs -0 -r stat -c %s -- 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
  else
    tree=$(du -cb --exclude=.git --exclude='build*' --exclude=gpu-bundle "$ROOT" | tail -1 | cut -f1)
  fi
  note "sizes: staged $(du -sb "$STAGE" | cut -f1) bytes; archive $bundle bytes; working tree" \
    "$tree bytes; together $((bundle + tree)) of $LIMIT"
  [ $((bundle + tree)) -lt $LIMIT ] || fail "working tree + bundle exceed 64 MiB"
  cp "$STAGE/COMMIT" "$OUT_DIR/COMMIT"
  note "archive: $archive, built from $(cat "$OUT_DIR/COMMIT") (carry: $(realpath --relative-to="$ROOT" "$OUT_DIR" 2>/dev/null || echo "$OUT_DIR"))"
}

[ $BUILD -eq 1 ] && configure_and_build
check_build_dir
STAGE=$BUILD_DIR/pagoda-gpu
assemble
check_closure
check_runs
check_plan
pack_and_measure
note "OK"
