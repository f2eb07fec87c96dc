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

.PHONY: run test bench deps bench-deps apt build clean

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

test: deps
	$(CARGO) build --workspace --all-targets
	$(CARGO) test --workspace

bench: bench-deps
	$(CARGO) run --release -p engram-bench -- all --out docs/bench
	$(CARGO) run --release -p engram-bench -- stm --out docs/bench
	$(CARGO) run --release -p engram-bench -- lazy --out docs/bench
	$(CARGO) run --release -q -p engram-cli -- crashtest --deep

clean:
	$(CARGO) clean
	rm -rf data
