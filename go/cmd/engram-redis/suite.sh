#!/usr/bin/env bash
# suite.sh BIN: runs Redis 7.0.15's own test suite (Debian's source package,
# fetched once with a private deb-src list into target/redis-suite; the
# system's apt setup is untouched) with `runtest --host --port --tags
# -needs:debug` per unit, against Debian's real redis-server and against
# engram-redis in the same run, prints passed/failed per unit side by side,
# and then checks (suite-check.py) that every test redis-server passed also
# passed on engram-redis, except the entries of suite-skip.txt (each with
# its reason; engram-redis runs with them as runtest's --skipfile).
# Exit status 1 when the check fails. UNITS= picks units; SUITE_CHECK=0
# only reports.
set -uo pipefail
bin=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
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
run() { # name unit
  local p dir pid skip=(); p=$(port); dir=$(mktemp -d /dev/shm/engram-redis-suite.XXXXXX 2>/dev/null || mktemp -d)
  if [ "$1" = engram ]; then
    "$bin" --port "$p" --dir "$dir" >"$dir/log" 2>&1 & pid=$!
    python3 "$here/suite-check.py" skipfile "$here/suite-skip.txt" "$2" >"$dir/skip"
    skip=(--skipfile "$dir/skip")
  else redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/log" 2>&1 & pid=$!; fi
  for _ in $(seq 200); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
  # --baseport: the test framework's own port (21079 by default, below
  # baseport) drawn at random, so two suite runs on one machine (other
  # worktrees) do not take the same one ("address already in use").
  (cd "$src" && timeout 600 ./runtest --host 127.0.0.1 --port "$p" --baseport $((22000 + RANDOM % 20000)) --tags -needs:debug "${skip[@]}" --single "$2" --clients 1 2>&1) >"$dir/out"
  cp "$dir/out" "$root/$1-$(echo "$2" | tr / _).log"
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"
}
for u in $units; do run real "$u"; run engram "$u"; done
# shellcheck disable=SC2086
python3 "$here/suite-check.py" check "$here/suite-skip.txt" "$root" $units
status=$?
echo "logs: $root/{real,engram}-<unit>.log"
[ "${SUITE_CHECK:-1}" = 0 ] && exit 0
exit $status
