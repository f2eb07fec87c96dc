#!/usr/bin/env bash
# smoke.sh BIN: starts engram-redis on a free port with a pool under a temp
# dir and drives it with Debian's redis-cli and redis-benchmark; then
# restarts it and checks the benchmark's keys are still there.
set -euo pipefail
bin=$1
dir=$(mktemp -d /dev/shm/engram-redis-smoke.XXXXXX 2>/dev/null || mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
up() {
  "$bin" --port "$port" --dir "$dir" >"$dir/log" 2>&1 & pid=$!
  for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  cat "$dir/log"; exit 1
}
up
cli() { redis-cli -p "$port" "$@"; }
[ "$(cli set greeting hello)" = OK ]
[ "$(cli get greeting)" = hello ]
[ "$(cli rpush l a b c)" = 3 ]
[ "$(cli lrange l 0 -1 | tr '\n' ,)" = "a,b,c," ]
[ "$(cli -3 hset h f v)" = 1 ]
cli info persistence | grep -q '^engram_pool:'
# Interactive redis-cli shows argument hints (built from the server's
# COMMAND DOCS, Redis 7's, as with redis-server). A pty answers linenoise's
# cursor-position queries with an 80-column terminal.
python3 - "$port" <<'PY'
import os, pty, select, sys
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm"
    os.execvp("redis-cli", ["redis-cli", "-p", sys.argv[1]])
def drain(t):
    out = b""
    while select.select([fd], [], [], t)[0]:
        try:
            b = os.read(fd, 4096)
        except OSError:
            break
        out += b
        if b"\x1b[6n" in b:
            os.write(fd, b"\x1b[1;80R")
    return out
drain(1.0)
out = b""
for ch in b"zadd ":
    os.write(fd, bytes([ch]))
    out += drain(0.3)
os.kill(pid, 9)
if b"score member" not in out:
    sys.exit("redis-cli shows no hint for ZADD: %r" % out[-200:])
PY
printf 'SET piped 1\nINCR piped\nGET piped\n' | cli >/dev/null
[ "$(cli get piped)" = 2 ]
redis-benchmark -p "$port" -q -n 2000 -c 20 -P 4 -t set,get,incr,lpush,hset,sadd,zadd,mset >"$dir/bench" 2>&1
grep -q 'SET:' "$dir/bench"
keys=$(cli dbsize)
cli shutdown >/dev/null 2>&1 || true
wait "$pid" || true
up
[ "$(cli dbsize)" = "$keys" ] || { echo "dbsize $(cli dbsize) after restart, $keys before"; exit 1; }
[ "$(cli get greeting)" = hello ]
echo "redis-cli / redis-benchmark smoke: ok ($keys keys kept across a restart)"
