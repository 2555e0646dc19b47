# Convenience front end to CMake.
#   make            Release build into build/ (CLI at build/bin/candle)
#   make test       build and run every test, then again under ASan + UBSan
#   make run        fetch the default model and generate text
JOBS ?= $(shell nproc)
CMAKE ?= cmake

.PHONY: all build test test-plain test-asan test-tsan fuzz run clean

all: build

build:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build build -j $(JOBS)

test: test-plain test-asan

test-plain: build
	cd build && ctest --output-on-failure -j $(JOBS)

test-asan:
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCANDLE_SANITIZE=ON
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS) -LE slow

test-tsan:
	$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DCANDLE_TSAN=ON
	$(CMAKE) --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS) -L threads

clean:
	rm -rf build build-asan build-tsan build-fuzz
