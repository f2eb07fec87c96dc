#!/usr/bin/env python3
"""bench.py ENGRAM_BIN OUT_DIR [--quick]: engram-redis against Debian's
redis-server 7.0 with redis-benchmark, and the restart time with 1M keys.

Throughput: SET, GET, INCR, LPUSH, HSET, ZADD, MSET (random keys/members
over 100k, so the list, hash and sorted set grow to tens of thousands of
elements), 50 clients, and SET, GET with 1 client, pipeline 1 and 16, for
  engram-redis pmem  (pool on /dev/shm: flush + fence, no msync)
  engram-redis msync (pool on the disk: group commit, one msync per batch)
  redis-server appendonly yes, appendfsync always   (AOF on the disk)
  redis-server appendonly yes, appendfsync everysec (AOF on the disk)
  redis-server appendonly yes, appendfsync always   (AOF on /dev/shm)
  redis-server persistence off
each configuration's runs interleaved with the others' (round-robin, median
of the rounds). Restart: 1M keys written with redis-cli --pipe; then the
time from process start to the first PONG and to the first GET of an
existing key (Redis answers -LOADING while it loads) for engram-redis
(clean shutdown and kill -9, pmem and msync) and redis-server loading its
AOF and its RDB. Writes OUT_DIR/redis.md and OUT_DIR/redis.png."""
import os, shutil, socket, statistics, subprocess, sys, tempfile, time

QUICK = "--quick" in sys.argv
ENGRAM, OUT = sys.argv[1], sys.argv[2]
# "name/cN": the test with N clients instead of 50.
TESTS = ["set", "get", "incr", "lpush", "hset", "zadd", "mset", "set/c1", "get/c1"]
ROUNDS = 1 if QUICK else 3
N = {1: 2000 if QUICK else 20000, 16: 10000 if QUICK else 100000}
# engram-redis in msync mode on this disk does tens to hundreds of writes/s
# (one msync of every dirtied page per batch): fewer requests there.
N_MSYNC = {1: 300 if QUICK else 1000, 16: 500 if QUICK else 2000}
KEYS = 20000 if QUICK else 1000000
DISK = os.path.abspath("target/redis-bench-disk")
SHM = "/dev/shm"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def ask(port, cmd, timeout=0.2):
    """One inline command; the reply's first line, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(cmd.encode() + b"\r\n")
            return s.recv(256).split(b"\r\n")[0].decode()
    except OSError:
        return None


class Server:
    def __init__(self, name, kind, fsdir, mode=None):
        self.name, self.kind, self.mode, self.durability = name, kind, mode, "auto"
        self.dir = tempfile.mkdtemp(prefix="engram-redis-bench.", dir=fsdir)
        self.port, self.proc = free_port(), None

    def argv(self):
        if self.kind == "engram":
            return [ENGRAM, "--port", str(self.port), "--pool", os.path.join(self.dir, "b.pool"),
                    "--maxmemory", "4gb", "--durability", self.durability]
        a = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir, "--save", ""]
        if self.mode == "off":
            return a + ["--appendonly", "no"]
        if self.mode == "rdb":
            return a + ["--appendonly", "no", "--dbfilename", "dump.rdb"]
        return a + ["--appendonly", "yes", "--appendfsync", self.mode]

    def start(self):
        """Starts; returns (seconds to the first PONG, to the first GET)."""
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pong = get = None
        while get is None:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited")
            r = ask(self.port, "PING" if pong is None else "GET key:000000000001")
            now = time.perf_counter() - t0
            if pong is None and r == "+PONG":
                pong = now
            elif pong is not None and r is not None and r.startswith("$"):
                get = now
            else:
                time.sleep(0.0005)
        return pong, get

    def stop(self, kill=False):
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            subprocess.run(["redis-cli", "-p", str(self.port), "shutdown"], capture_output=True)
        self.proc.wait()
        self.proc = None

    def clean(self):
        self.stop(kill=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def bench(port, test, pipe, n):
    test, _, clients = test.partition("/c")
    reqs = n[pipe] // 10 if clients == "1" else n[pipe]  # one client is slower: fewer requests
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", clients or "50", "-P", str(pipe), "-n", str(reqs),
                          "-r", "100000", "-t", test, "--csv"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if len(f) > 1 and f[0] != "test":
            return float(f[1])
    return float("nan")


def throughput():
    configs = [Server("engram-redis pmem (/dev/shm)", "engram", SHM),
               Server("engram-redis msync (disk)", "engram", DISK),
               Server("redis AOF always (disk)", "redis", DISK, "always"),
               Server("redis AOF everysec (disk)", "redis", DISK, "everysec"),
               Server("redis AOF always (/dev/shm)", "redis", SHM, "always"),
               Server("redis persistence off", "redis", SHM, "off")]
    res = {}
    try:
        for s in configs:
            s.start()
        for rnd in range(ROUNDS):
            for test in TESTS:
                for pipe in (1, 16):
                    for s in configs:
                        n = N_MSYNC if "msync" in s.name else N
                        res.setdefault((s.name, test, pipe), []).append(bench(s.port, test, pipe, n))
            print(f"round {rnd + 1}/{ROUNDS} done", flush=True)
    finally:
        for s in configs:
            s.clean()
    return [s.name for s in configs], {k: statistics.median(v) for k, v in res.items()}


def fill(port):
    proto = tempfile.NamedTemporaryFile(delete=False, dir=SHM)
    with proto:
        for i in range(KEYS):
            k, v = f"key:{i:012d}", f"value-{i}"
            proto.write(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${len(v)}\r\n{v}\r\n".encode())
    with open(proto.name, "rb") as f:
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=f, capture_output=True, check=True)
    os.unlink(proto.name)


def restart():
    cases = [("engram-redis pmem, clean shutdown", "engram", SHM, None, False),
             ("engram-redis pmem, after kill -9", "engram", SHM, None, True),
             ("engram-redis msync (disk), clean shutdown", "engram", DISK, None, False),
             ("engram-redis msync (disk), after kill -9", "engram", DISK, None, True),
             ("redis-server loading its AOF (disk)", "redis", DISK, "everysec", False),
             ("redis-server loading its RDB (disk)", "redis", DISK, "rdb", False)]
    out = []
    for name, kind, fs, mode, kill in cases:
        s = Server(name, kind, fs, mode)
        try:
            t0 = time.perf_counter()
            if kind == "engram" and fs == DISK:
                # Filling in msync mode would take hours here: fill the
                # same pool format on /dev/shm, shut down, copy it to the
                # disk and reopen it there in msync mode.
                tmp = Server("fill", "engram", SHM)
                tmp.start()
                fill(tmp.port)
                tmp.stop()
                shutil.copy(os.path.join(tmp.dir, "b.pool"), os.path.join(s.dir, "b.pool"))
                tmp.clean()
                s.durability = "msync"
                s.start()
            else:
                s.start()
                fill(s.port)
            filled = time.perf_counter() - t0
            if mode == "rdb":
                subprocess.run(["redis-cli", "-p", str(s.port), "save"], capture_output=True)
            times = []
            for _ in range(ROUNDS):
                if kill:
                    time.sleep(0.2)  # the last batch's commit
                s.stop(kill=kill)
                times.append(s.start())
            out.append((name, filled, statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)))
            print(f"restart: {name}: {out[-1][2]*1000:.1f} / {out[-1][3]*1000:.1f} ms", flush=True)
        finally:
            s.clean()
    return out


def plot(names, res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    w = 0.8 / len(names)
    for ax, pipe in zip(axes, (1, 16)):
        for j, n in enumerate(names):
            ax.bar([i + j * w for i in range(len(TESTS))], [res[(n, t, pipe)] / 1000 for t in TESTS], w, label=n)
        ax.set_xticks([i + 0.4 - w / 2 for i in range(len(TESTS))], [t.upper() for t in TESTS])
        ax.set_title(f"redis-benchmark -c 50 (/c1: -c 1) -P {pipe}")
        ax.set_ylabel("thousand requests / s")
        ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    os.makedirs(DISK, exist_ok=True)
    os.makedirs(OUT, exist_ok=True)
    names, res = throughput()
    rs = restart()
    have_plot = plot(names, res, os.path.join(OUT, "redis.png"))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[0]
    fsline = subprocess.run(["df", "-T", DISK], capture_output=True, text=True).stdout.splitlines()[-1].split()
    with open(os.path.join(OUT, "redis.md"), "w") as f:
        f.write("# engram-redis vs redis-server 7.0\n\n")
        f.write(f"`make bench-redis` (`go/cmd/engram-redis/bench.py`{' --quick' if QUICK else ''}), "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {os.cpu_count()} cores ({cpu}), "
                f"load average {load} at the end (a shared machine: other builds ran), "
                f"disk: {fsline[1]} on {fsline[0]}, /dev/shm: tmpfs. engram-redis built with the release "
                f"FFI library; Debian's redis-server {subprocess.run(['redis-server', '--version'], capture_output=True, text=True).stdout.split()[2][2:]}.\n\n")
        f.write("Durability: engram-redis acknowledges a write after its batch's region committed: in pmem mode "
                "(pool on /dev/shm) flush + fence, in msync mode (pool on the disk) one msync per batch (the "
                "engine's current msync path; its WAL + group-commit rework is on another branch and not "
                "measured here). redis-server with `appendfsync always` fsyncs its AOF once per event-loop "
                "turn before replying; `everysec` may lose the last second; off loses everything since start.\n\n")
        f.write(f"## Throughput (requests/s, median of {ROUNDS} interleaved rounds)\n\n")
        f.write(f"redis-benchmark -c 50 -r 100000, -n {N[1]} (pipeline 1) and {N[16]} (pipeline 16); "
                f"engram-redis msync: -n {N_MSYNC[1]} and {N_MSYNC[16]} (it is that slow).\n\n")
        f.write("| configuration | " + " | ".join(f"{t.upper()} P{p}" for p in (1, 16) for t in TESTS) + " |\n")
        f.write("|---|" + "---:|" * (2 * len(TESTS)) + "\n")
        for n in names:
            f.write(f"| {n} | " + " | ".join(f"{res[(n, t, p)]:,.0f}" for p in (1, 16) for t in TESTS) + " |\n")
        off = "redis persistence off"
        f.write("\nRatios engram-redis / redis-server:\n\n| | " + " | ".join(f"{t.upper()} P{p}" for p in (1, 16) for t in TESTS) + " |\n")
        f.write("|---|" + "---:|" * (2 * len(TESTS)) + "\n")
        for a, b in [("engram-redis pmem (/dev/shm)", off), ("engram-redis pmem (/dev/shm)", "redis AOF always (/dev/shm)"),
                     ("engram-redis msync (disk)", "redis AOF always (disk)"), ("engram-redis msync (disk)", "redis AOF everysec (disk)")]:
            f.write(f"| {a} / {b} | " + " | ".join(f"{res[(a, t, p)] / res[(b, t, p)]:.2f}" for p in (1, 16) for t in TESTS) + " |\n")
        if have_plot:
            f.write("\n![throughput](redis.png)\n")
        f.write(f"\n## Restart with {KEYS:,} keys (median of {ROUNDS})\n\n")
        f.write("Process start to the first `+PONG`, and to the first successful GET of an existing key.\n\n")
        f.write("The msync pools were filled on /dev/shm and copied to the disk (filling in msync mode takes hours here).\n\n")
        f.write("| case | fill (redis-cli --pipe) s | first PONG ms | first GET ms |\n|---|---:|---:|---:|\n")
        for name, filled, pong, get in rs:
            f.write(f"| {name} | {filled:.1f} | {pong * 1000:.1f} | {get * 1000:.1f} |\n")
    print(open(os.path.join(OUT, "redis.md")).read())


if __name__ == "__main__":
    main()
