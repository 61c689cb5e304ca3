# baton — entry points. Every target installs missing Debian packages first
# (scripts/install-deps.sh, idempotent), then configures and builds with CMake.
#
#   make demo    three local batond, the model split 1,1,1, streamed text
#   make check   fast: build, unit + integration tests, corpus replay
#   make test    everything CI runs: check + proofs + ASan/UBSan run + fuzz
#                + coverage
#   make coverage   line coverage of the fuzz corpus replay, per file, against
#                   the floors of fuzz/coverage-floors.txt (fuzz/coverage.sh)
#   make fuzz-grow  longer AFL++ campaigns whose new inputs join fuzz/corpus
#                   (fuzz/grow.sh; SECONDS=600 per target, TARGETS=all)
#   make bench   benchmarks (figures, not pass/fail)

BUILD ?= build
ASAN_BUILD ?= build-asan
COV_BUILD ?= build-coverage
JOBS ?= 2
MODEL ?=
CMAKE_FLAGS ?=

.PHONY: all deps deps-full deps-bench build demo check test test-asan proof fuzz coverage \
	fuzz-grow bench clean

all: build

deps:
	@./scripts/install-deps.sh

deps-full:
	@./scripts/install-deps.sh --full

deps-bench:
	@./scripts/install-deps.sh --bench

CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

build: deps
	@$(CONFIGURE)
	@MAKEFLAGS= cmake --build $(BUILD) -j$(JOBS) -- --no-print-directory

# the demo needs only baton and batond (a no-op `build` lists every test
# and fuzz target it checked)
demo: deps
	@$(CONFIGURE)
	@MAKEFLAGS= cmake --build $(BUILD) -j$(JOBS) --target baton batond -- --no-print-directory
	@MODEL="$(MODEL)" BUILD_DIR=$(BUILD) ./scripts/demo.sh

check: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE 'proof|fuzz-campaign|asan'

proof: deps-full build
	@cd $(BUILD) && ctest --output-on-failure -L proof

# -O1, as the ASan documentation advises: the tests ran 483 s at -O0, 233 s at -O1
# (2 vCPUs), and a leak that -O0 kept reachable on the stack was found
test-asan: deps-full
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
		-DCMAKE_C_COMPILER=clang -DBATON_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(ASAN_BUILD) -j$(JOBS) -- --no-print-directory
	@cd $(ASAN_BUILD) && BATON_ASAN=1 ctest --output-on-failure -j$(JOBS) -LE 'proof|fuzz-campaign'

fuzz: deps-full build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L fuzz-campaign

coverage: deps-full
	@COVERAGE_BUILD_DIR=$(abspath $(COV_BUILD)) JOBS=$(JOBS) ./fuzz/coverage.sh

fuzz-grow: deps-full
	@FUZZ_GROW_SECONDS=$(if $(SECONDS),$(SECONDS),600) JOBS=$(JOBS) ./fuzz/grow.sh $(TARGETS)

test: check proof test-asan fuzz coverage
	@echo "make test: all stages passed"

bench: deps-bench build
	@BUILD_DIR=$(BUILD) ./bench/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(COV_BUILD)
