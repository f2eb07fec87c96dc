#!/usr/bin/env python3
"""abbench.py TESTS PIPES ROUNDS NAME=SPEC ...: before/after runs of a few
redis-benchmark cells (bench.py runs the whole matrix). TESTS: comma list
of redis-benchmark tests (set, zadd, mset, ...; "set/c1": one client
instead of 50), PIPES: comma list of pipeline depths, ROUNDS: rounds; each
round runs every cell on every server in turn (alternating), and the
median of the rounds is printed: requests/s and the server's CPU time per
request (all its threads, /proc/PID/task/*/schedstat), the figure that
holds on a shared machine. SPEC: engram:BIN:DURABILITY:DIR (an
engram-redis binary, a pool in a new directory under DIR) or
redis:off|always|everysec[:DIR] (Debian's redis-server, persistence off or
AOF under DIR); each server's directory is abbench.PID.NAME.* (removed
at the end). -r 100000; -n 100000 with a pipeline, 20000 without (a
tenth with one client). Example (docs/bench/redis.md, "ZADD, MSET and
short values"):
  abbench.py zadd,mset 16 3 before=engram:OLD:pmem:/dev/shm \
      after=engram:NEW:pmem:/dev/shm off=redis:off"""
import re, os, sys, subprocess, socket, tempfile, time, shutil, statistics, glob
tests = sys.argv[1].split(","); pipes = [int(p) for p in sys.argv[2].split(",")]; rounds = int(sys.argv[3])
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def cpu(pid):
    t = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try: t += int(open(f).read().split()[0])
        except OSError: pass
    return t / 1e9
servers = []
for spec in sys.argv[4:]:
    name, rest = spec.split("=", 1); parts = rest.split(":")
    port = free_port()
    if parts[0] == "engram":
        d = tempfile.mkdtemp(prefix=f"abbench.{os.getpid()}.{name}.", dir=parts[3])
        argv = [parts[1], "--port", str(port), "--pool", d + "/b.pool", "--maxmemory", "2gb", "--durability", parts[2]]
    else:
        d = tempfile.mkdtemp(prefix=f"abbench.{os.getpid()}.{name}.", dir=parts[2] if len(parts) > 2 else "/tmp")
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", ""]
        argv += ["--appendonly", "no"] if parts[1] == "off" else ["--appendonly", "yes", "--appendfsync", parts[1]]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers.append((name, port, p, d))
time.sleep(1.0)
res = {}
try:
    for r in range(rounds):
        for t in tests:
            for pp in pipes:
                for name, port, p, d in servers:
                    tname, c = t, 50
                    if "/c" in t: tname, c = t.split("/c"); c = int(c)
                    n = 100000 if pp > 1 else 20000
                    if c == 1: n //= 10
                    c0 = cpu(p.pid)
                    out = subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-t", tname, "-c", str(c), "-r", "100000",
                                          "-n", str(n), "-P", str(pp)], capture_output=True, text=True).stdout
                    c1 = cpu(p.pid)
                    rps = float(re.findall(r"([0-9.]+) requests per second", out)[-1])
                    res.setdefault((name, t, pp), []).append((rps, (c1 - c0) / n * 1e6))
    for t in tests:
        for pp in pipes:
            base = None
            for name, *_ in servers:
                v = res[(name, t, pp)]
                rps = statistics.median(x[0] for x in v); us = statistics.median(x[1] for x in v)
                print(f"{t:8} P{pp:<3} {name:14} {rps:10.0f} req/s  {us:6.2f} us/req CPU   all: " + " ".join(f"{x[0]:.0f}/{x[1]:.2f}" for x in v))
    print("load:", open("/proc/loadavg").read().strip())
finally:
    for name, port, p, d in servers:
        p.kill(); p.wait(); shutil.rmtree(d, ignore_errors=True)
