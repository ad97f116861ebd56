# The two commands a newcomer runs: `make serve` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
SERVE_FLAGS ?= --port 50051 --metrics-port 9090
# The daemon listens on loopback unless SERVE_FLAGS names a --host.
SERVE_HOST = $(if $(findstring --host,$(SERVE_FLAGS)),,--host 127.0.0.1)
# CUDA backend: `make test` compiles it wherever nvcc exists (AUTO); `make serve` only when a
# GPU is present, unless asked for with `make serve PAGODA_CUDA=ON` (or OFF).
PAGODA_CUDA ?= AUTO
SERVE_CUDA = $(if $(filter command line environment,$(origin PAGODA_CUDA)),$(PAGODA_CUDA),$(shell nvidia-smi -L >/dev/null 2>&1 && echo AUTO || echo OFF))
CONFIGURE = cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps configure build test serve asan tsan clang-checks format clean

all: build

deps:
	./scripts/install-deps.sh

configure: deps
	$(CONFIGURE) -DPAGODA_CUDA=$(PAGODA_CUDA) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Runs every test through ctest.
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 600

# Builds only the daemon (not the suite) and serves the built-in default model, the real
# stories260K. Give another with: make serve SERVE_FLAGS="--model path/to/model.gguf".
# Configures once (a build folder that exists keeps its settings unless PAGODA_CUDA is given),
# so a second `make serve` with nothing changed starts at once.
serve: deps
	@if [ ! -f $(BUILD_DIR)/build.ninja ] || [ -n "$(filter command line environment,$(origin PAGODA_CUDA))" ]; then \
	  $(CONFIGURE) -DPAGODA_CUDA=$(SERVE_CUDA) $(CMAKE_FLAGS); fi
	cmake --build $(BUILD_DIR) -j$(JOBS) --target pagoda
	$(BUILD_DIR)/bin/pagoda serve $(SERVE_HOST) $(SERVE_FLAGS)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (CPU only).
asan:
	$(MAKE) test BUILD_DIR=build-asan PAGODA_CUDA=OFF CMAKE_FLAGS="-DPAGODA_SANITIZE=address"

# The engine's threads under ThreadSanitizer (CPU only): the engine, scheduler, batching,
# golden, CPU kernel (attention, products: they use the thread pool) and profiling tests.
# The gRPC server tests are left out: Debian's gRPC and abseil are not built with
# TSan, so their internal synchronization is invisible to it and it reports races inside
# gRPC's own inlined code.
tsan:
	$(MAKE) build BUILD_DIR=build-tsan PAGODA_CUDA=OFF CMAKE_FLAGS="-DPAGODA_SANITIZE=thread"
	cd build-tsan && ctest --output-on-failure -j$(JOBS) -R "^(Engine|Scheduler|FairSharePolicy|Batch|KvCache|Golden|CpuBackend|CpuF32|QuantMatMul|Profiling|StopStrings|ThreadPool|PrefillPacer|PacedScheduler|CopyKvBlocks)"

# clang's static and dynamic checks (docs/HARDENING.md): every library, the pagoda binary and
# pagoda-decode-bench (it holds Mutex code) built with -Wthread-safety as errors, then each
# libFuzzer target (fuzz/) run for FUZZ_RUNS inputs from its seed corpus. Everything in this
# build is under ASan+UBSan.
CLANG_BUILD_DIR ?= build-clang
FUZZ_RUNS ?= 20000
clang-checks: deps
	cmake -S . -B $(CLANG_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DPAGODA_CUDA=OFF -DPAGODA_THREAD_SAFETY=ON \
	  -DPAGODA_FUZZ=ON $(CMAKE_FLAGS)
	cmake --build $(CLANG_BUILD_DIR) -j$(JOBS) --target pagoda pagoda_bench_lib pagoda-decode-bench pagoda_fuzzers
	fuzz/run_fuzzers.sh $(CLANG_BUILD_DIR) $(FUZZ_RUNS)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD_DIR)
