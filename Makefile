# Thin front door: install dependencies, configure, build, run. The real build is CMake (CMakeLists.txt).
#   make demo   - install deps, build, run `qkv demo`
#   make test   - install deps, build, run the whole test suite (ctest)
#   make asan   - the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make clang  - the same suite built with clang (Release)
#   make build  - just build (build/qkv)
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CLANG_BUILD ?= build-clang

.PHONY: deps build demo test asan clang clean

deps:
	bash scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/qkv demo

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DQKV_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	QKV_SANITIZED=1 ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

clang: deps
	cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang
	cmake --build $(CLANG_BUILD) -j $(JOBS)
	ctest --test-dir $(CLANG_BUILD) --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CLANG_BUILD)
