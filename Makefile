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

.PHONY: run test bench deps bench-deps apt build clean test-c test-go go-deps ffi-lib bench-go redis test-redis redis-deps test-redis-suite

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

test: deps test-c test-go test-redis
	$(CARGO) build --workspace --all-targets
	$(CARGO) test --workspace

bench: bench-deps
	$(CARGO) run --release -p engram-bench -- all --out docs/bench
	$(CARGO) run --release -p engram-bench -- stm --out docs/bench
	$(CARGO) run --release -q -p engram-cli -- crashtest --deep
	$(MAKE) --no-print-directory bench-go

clean:
	$(CARGO) clean
	rm -rf data

# ----- the C ABI (crates/engram-ffi, include/engram.h) and the Go front end (go/)
# Go is preinstalled at /usr/local/go/bin on the project's machines; if it is
# nowhere, go-deps installs Debian's golang.
GO ?= $(shell command -v go 2>/dev/null || { [ -x /usr/local/go/bin/go ] && echo /usr/local/go/bin/go; } || echo go)
# Where cgo finds the static library (go/engram.go: -L../target/go-lib).
GO_LIB_DIR := target/go-lib
FFI_PROFILE ?= debug
# Go's build cache does not see a C library change (cgo docs), so the
# library's hash goes into CGO_CFLAGS: a new library rebuilds and relinks.
GO_ENV = CGO_CFLAGS="-O2 -g -DENGRAM_FFI_STAMP=$$(sha1sum $(GO_LIB_DIR)/libengram_ffi.a | cut -c1-16)"

go-deps:
	@command -v $(GO) >/dev/null 2>&1 || $(MAKE) --no-print-directory apt PKGS="golang-go"

# Builds the FFI and puts its static library where cgo looks for it.
ffi-lib:
	$(CARGO) build -p engram-ffi $(if $(filter release,$(FFI_PROFILE)),--release,)
	@mkdir -p $(GO_LIB_DIR)
	cp target/$(FFI_PROFILE)/libengram_ffi.a $(GO_LIB_DIR)/libengram_ffi.a

test-c: ffi-lib
	@mkdir -p target/c-test
	cc -std=c11 -Wall -Wextra -Werror -Iinclude crates/engram-ffi/tests/c/abi_test.c \
	  $(GO_LIB_DIR)/libengram_ffi.a -lpthread -ldl -lm -o target/c-test/abi_test
	@d=$$(mktemp -d); target/c-test/abi_test $$d; rc=$$?; rm -rf $$d; exit $$rc

test-go: go-deps ffi-lib
	$(CARGO) build -p engram-cli
	cd go && $(GO_ENV) $(GO) vet ./... && $(GO_ENV) ENGRAM_CLI=$(CURDIR)/target/debug/engram $(GO) test -race -count=1 ./...

# Go on Engram vs Rust on Engram vs PMDK (binary-trees, n-body, sps) and the
# cgo round trip; report in docs/bench/go.md.
bench-go: bench-deps go-deps
	$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	$(CARGO) build --release -p engram-bench
	cd go && $(GO_ENV) $(GO) run ./cmd/engram-gobench -rust $(CURDIR)/target/release/engram-bench -dir /dev/shm -out $(CURDIR)/docs/bench/go.md

# ----- engram-redis (go/cmd/engram-redis, go/internal/redis; docs/redis.md)
# Debian's redis-server and redis-tools: the differential test's reference
# server and the redis-cli / redis-benchmark smoke run.
REDIS_APT_PACKAGES := redis-server redis-tools
REDIS_BIN := target/go-bin/engram-redis
# GO_ENV with the library's absolute path (the recipes cd into go/).
REDIS_GO_ENV = CGO_CFLAGS="-O2 -g -DENGRAM_FFI_STAMP=$$(sha1sum $(CURDIR)/$(GO_LIB_DIR)/libengram_ffi.a | cut -c1-16)"

redis-deps:
	@$(MAKE) --no-print-directory apt PKGS="$(REDIS_APT_PACKAGES)"

$(REDIS_BIN): ffi-lib
	@mkdir -p $(dir $(REDIS_BIN))
	cd go && $(REDIS_GO_ENV) $(GO) build -o $(CURDIR)/$(REDIS_BIN) ./cmd/engram-redis

# The server's tests: go-redis end to end, the differential test against
# redis-server, bad input, 100 kill -9s (ENGRAM_REDIS_KILLS=1000 for the
# soak), then redis-cli and redis-benchmark against the built binary.
test-redis: go-deps redis-deps $(REDIS_BIN)
	cd go && $(REDIS_GO_ENV) $(GO) vet ./internal/redis ./cmd/engram-redis && $(REDIS_GO_ENV) $(GO) test -count=1 ./internal/redis
	go/cmd/engram-redis/smoke.sh $(REDIS_BIN)

# Redis 7.0.15's own test suite (Debian source package, cached under
# target/redis-suite) over unit/type/{incr,hash,list,set,zset,string},
# unit/keyspace, unit/expire, unit/multi: passed/failed per unit for
# engram-redis beside redis-server (a few minutes; not part of make test).
test-redis-suite: go-deps redis-deps $(REDIS_BIN)
	go/cmd/engram-redis/suite.sh $(REDIS_BIN)

# Starts engram-redis on ./data/redis.pool at port 6379 (FFI_PROFILE=release
# for speed).
redis: go-deps
	@$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	@$(MAKE) --no-print-directory $(REDIS_BIN) FFI_PROFILE=release
	@mkdir -p data
	@echo "engram-redis on 127.0.0.1:6379, pool ./data/redis.pool; connect with: redis-cli -p 6379"
	$(REDIS_BIN) --port 6379 --pool data/redis.pool
