#!/usr/bin/env python3
"""gcpause.py ENGRAM_BIN idle|load: the background recovery GC of
engram-redis after kill -9, with 1M keys (pool on /dev/shm, pmem mode).

Fills a pool with redis-cli --pipe, kills the server with SIGKILL,
restarts it and polls INFO persistence every 10 ms until the GC is no
longer pending; with `load`, redis-benchmark (SET, 20 clients, random keys
over 1M) writes meanwhile. Prints the first PONG, when the GC was done and
INFO's engram_recovery_gc_* fields (marked, freed, pages written during
the mark, concurrent and pause times). Wall times on a shared machine:
the load average is printed too. Removes its pool. docs/redis.md, Restart.
"""
import os, subprocess, sys, tempfile, time, socket, shutil
BIN = sys.argv[1]; LOAD = sys.argv[2] == "load"; KEYS = 1_000_000
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def cli(port, *a):
    return subprocess.run(["redis-cli", "-p", str(port), *a], capture_output=True, text=True).stdout
def up(port):
    while cli(port, "ping").strip() != "PONG": time.sleep(0.005)
d = tempfile.mkdtemp(prefix="r8g.", dir="/dev/shm"); port = free_port()
argv = [BIN, "--port", str(port), "--pool", os.path.join(d, "p.pool"), "--maxmemory", "4gb", "--durability", "pmem"]
p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); up(port)
proto = os.path.join(d, "fill.txt")
with open(proto, "wb") as f:
    for i in range(KEYS):
        k, v = f"key:{i:012d}", f"value-{i}"
        f.write(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${len(v)}\r\n{v}\r\n".encode())
with open(proto, "rb") as f:
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=f, capture_output=True, check=True)
os.unlink(proto)
time.sleep(0.2); p.kill(); p.wait()
t0 = time.perf_counter()
p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); up(port)
pong = time.perf_counter() - t0
bench = None
if LOAD:
    bench = subprocess.Popen(["redis-benchmark", "-p", str(port), "-t", "set", "-r", "1000000", "-n", "1000000", "-c", "20", "-q"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
while "engram_recovery_gc:pending" in cli(port, "info", "persistence"): time.sleep(0.01)
done = time.perf_counter() - t0
info = cli(port, "info", "persistence")
cmds = cli(port, "info", "stats")
if bench: bench.kill(); bench.wait()
print(f"mode={'load' if LOAD else 'idle'} first PONG {pong*1000:.0f} ms, GC done {done*1000:.0f} ms")
print("\n".join(l for l in info.splitlines() if "recovery_gc" in l or "undone" in l))
print("\n".join(l for l in cmds.splitlines() if "total_commands" in l))
print(open("/proc/loadavg").read())
p.kill(); p.wait(); shutil.rmtree(d)
