#!/usr/bin/env bash
# suite.sh BIN: runs Redis 7.0.15's own test suite (Debian's source package,
# fetched once with a private deb-src list into target/redis-suite; the
# system's apt setup is untouched) with `runtest --host --port --tags
# -needs:debug` per unit, against engram-redis and against Debian's real
# redis-server, and prints passed/failed per unit side by side.
set -uo pipefail
bin=$(realpath "$1")
root=$(pwd)/target/redis-suite
src=$root/redis-7.0.15
if [ ! -d "$src/tests" ]; then
  mkdir -p "$root/lists/partial" "$root/cache/archives/partial"
  cat >"$root/sources.list" <<'LIST'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
LIST
  A="-o Dir::Etc::SourceList=$root/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$root/lists -o Dir::Cache=$root/cache"
  (cd "$root" && apt-get $A update -qq && apt-get $A source --download-only redis=7.0.15-1~deb12u10 >/dev/null 2>&1 || apt-get $A source --download-only redis >/dev/null) || exit 1
  tar -C "$root" -xzf "$root"/redis_7.0.15.orig.tar.gz
fi
units=${UNITS:-"unit/type/incr unit/type/hash unit/type/list unit/type/set unit/type/zset unit/type/string unit/keyspace unit/expire unit/multi"}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
run() { # name start-command...
  local p dir pid; p=$(port); dir=$(mktemp -d /dev/shm/engram-redis-suite.XXXXXX 2>/dev/null || mktemp -d)
  if [ "$1" = engram ]; then "$bin" --port "$p" --dir "$dir" >"$dir/log" 2>&1 & pid=$!
  else redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/log" 2>&1 & pid=$!; fi
  for _ in $(seq 200); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
  (cd "$src" && timeout 600 ./runtest --host 127.0.0.1 --port "$p" --tags -needs:debug --single "$2" --clients 1 2>&1) >"$dir/out"
  local ok err exc; ok=$(grep -c '^\[.*ok.*\]:' "$dir/out"); err=$(grep -c '^\[.*err.*\]:' "$dir/out"); exc=$(grep -c 'exception' "$dir/out")
  cp "$dir/out" "$root/$1-$(echo "$2" | tr / _).log"
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"
  echo "$ok $err $exc"
}
printf '| unit | redis-server passed / failed | engram-redis passed / failed |\n|---|---|---|\n'
for u in $units; do
  read -r rok rerr rexc < <(run real "$u")
  read -r eok eerr eexc < <(run engram "$u")
  note=""; [ "$eexc" != 0 ] && note=" (stopped by an exception)"
  printf '| %s | %s / %s | %s / %s%s |\n' "$u" "$rok" "$rerr" "$eok" "$eerr" "$note"
done
echo "logs: $root/{real,engram}-<unit>.log"
