# kvport: `make run` (demo on an embedded node) and `make test` (every test) are the quick start.
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all bootstrap build build-asan run test test-unit test-asan bench format clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake -S . -B build -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS)

build-asan: bootstrap
	@cmake -S . -B build-asan -G Ninja -DKVPORT_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)

run: build
	@build/bin/kvport doctor

# Every test on the normal build, then every test again under ASan + UBSan.
test: test-unit test-asan

test-unit: build
	@ctest --test-dir build --output-on-failure -j $(JOBS)

test-asan: build-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE no-sanitize

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	@rm -rf build build-asan build-aarch64
