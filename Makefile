# Engram: the entry points for every language.
#
#   make run    the demo: a pool under ./data/ that each run finds and extends
#   make test   installs what it needs, builds everything, runs every test
#   make bench  benchmarks against PMDK (libpmemobj), malloc and volatile STM; reports in
#               docs/bench/; then the deep crash-explorer sweep
#
# System packages come from apt (installed once, only if missing); Rust crates
# from crates.io through cargo.

SHELL := /bin/bash
APT_PACKAGES := libpmemobj-dev pkg-config
# The benchmark plots are drawn with a TrueType font read at run time.
BENCH_APT_PACKAGES := fonts-dejavu-core
CARGO ?= cargo
# The C++ ARP library (cpp/): CMake, GoogleTest, a C++17 compiler.
CPP_APT_PACKAGES := cmake g++ libgtest-dev
CPP_BUILD := target/cpp

.PHONY: run test bench deps bench-deps apt build clean test-cpp bench-arp

deps:
	@$(MAKE) --no-print-directory apt PKGS="$(APT_PACKAGES)"

bench-deps:
	@$(MAKE) --no-print-directory apt PKGS="$(APT_PACKAGES) $(BENCH_APT_PACKAGES)"

apt:
	@missing=""; for p in $(PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: deps
	$(CARGO) build --workspace --release

run:
	@mkdir -p data
	$(CARGO) run --release -q -p engram-cli -- demo data/demo.pool

test: deps test-cpp
	$(CARGO) build --workspace --all-targets
	$(CARGO) test --workspace

# Builds cpp/, runs its GoogleTest suite, and checks the traces the suite
# wrote (C++ trace mode: sps, TATP, YCSB_A) with the Rust ARP checker and
# each workload's recovery and invariant.
test-cpp:
	@$(MAKE) --no-print-directory apt PKGS="$(CPP_APT_PACKAGES)"
	cmake -S cpp -B $(CPP_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(CPP_BUILD) -j2
	cd $(CPP_BUILD) && ENGRAM_ARP_TRACE_DIR=$(abspath $(CPP_BUILD)) ctest --output-on-failure
	for w in sps TATP YCSB_A; do \
	  $(CARGO) run -q -p engram-model --bin engram-arp -- check $(CPP_BUILD)/$$w.trace $$w --model ARP || exit 1; \
	done

# Acquire-release persistency: x86 timings of each mapping (C++, tmpfs), then
# Table 5 / Table 2 / Figures 4-5 and the checker into docs/bench/arp.md.
bench-arp: bench-deps
	@$(MAKE) --no-print-directory apt PKGS="$(CPP_APT_PACKAGES)"
	cmake -S cpp -B $(CPP_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(CPP_BUILD) -j2
	$(CPP_BUILD)/arp_bench time --dir /dev/shm --ops 10000 --reps 3 > docs/bench/arp-x86.csv
	$(CARGO) run --release -p engram-bench -- arp --out docs/bench --x86 docs/bench/arp-x86.csv

bench: bench-deps
	$(CARGO) run --release -p engram-bench -- all --out docs/bench
	$(CARGO) run --release -p engram-bench -- stm --out docs/bench
	$(MAKE) --no-print-directory bench-arp
	$(CARGO) run --release -q -p engram-cli -- crashtest --deep

clean:
	$(CARGO) clean
	rm -rf data
