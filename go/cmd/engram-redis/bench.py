#!/usr/bin/env python3
"""bench.py ENGRAM_BIN OUT_DIR [--quick] [--throughput-only | --restart-only] [--before=BIN]:
engram-redis against Debian's redis-server 7.0 with redis-benchmark, and
the restart time with 1M keys. --throughput-only / --restart-only run one
part and keep the other part's section of the existing OUT_DIR/redis.md
(marked as from an earlier run).

Throughput: SET, GET, INCR, LPUSH, HSET, ZADD, MSET (random keys/members
over 100k, so the list, hash and sorted set grow to tens of thousands of
elements), 50 clients, and SET, GET with 1 client, pipeline 1 and 16, for
  engram-redis pmem  (pool on /dev/shm, --durability pmem: flush + fence)
  engram-redis wal   (pool on the disk, the default there: write-ahead log,
                      group commit: one fdatasync per batch of requests)
  redis-server appendonly yes, appendfsync always   (AOF on the disk)
  redis-server appendonly yes, appendfsync everysec (AOF on the disk)
  redis-server appendonly yes, appendfsync always   (AOF on /dev/shm)
  redis-server persistence off
each configuration's runs interleaved with the others' (round-robin, median
of the rounds). Restart: 1M keys written with redis-cli --pipe; then the
time from process start to the first PONG and to the first GET of an
existing key (Redis answers -LOADING while it loads) for engram-redis
(clean shutdown and kill -9, pmem and wal; kill -9 with --recovery-gc
eager too; after a kill also until the background recovery GC is done)
and redis-server loading its AOF and its RDB. Writes OUT_DIR/redis.md and OUT_DIR/redis.png."""
import os, shutil, socket, statistics, subprocess, sys, tempfile, time

QUICK = "--quick" in sys.argv
# --before=BIN: also run an earlier engram-redis binary (pmem and wal rows
# marked "before"), interleaved with the rest, for before/after figures.
BEFORE = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--before=")), None)
RUN_THROUGHPUT = "--restart-only" not in sys.argv
RUN_RESTART = "--throughput-only" not in sys.argv
ENGRAM, OUT = sys.argv[1], sys.argv[2]
# "name/cN": the test with N clients instead of 50.
TESTS = ["set", "get", "incr", "lpush", "hset", "zadd", "mset", "set/c1", "get/c1"]
ROUNDS = 1 if QUICK else 3
N = {1: 2000 if QUICK else 20000, 16: 10000 if QUICK else 100000}
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
    def __init__(self, name, kind, fsdir, mode=None, durability="auto", binary=None):
        self.name, self.kind, self.mode, self.durability = name, kind, mode, durability
        self.binary = binary or ENGRAM
        self.dir = tempfile.mkdtemp(prefix="engram-redis-bench.", dir=fsdir)
        self.port, self.proc = free_port(), None

    def argv(self):
        if self.kind == "engram":
            return [self.binary, "--port", str(self.port), "--pool", os.path.join(self.dir, "b.pool"),
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


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """The process's CPU time so far (user + system, all its threads): the
    sum of its threads' on-CPU nanoseconds (/proc/PID/task/*/schedstat),
    finer than /proc/PID/stat's clock ticks (10 ms: a one-client run of
    2,000 requests would show 5 us steps); a thread that exited during a
    run drops out, so the ticks are the fallback if the sum went down."""
    total = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        return ticks_seconds(pid)


def ticks_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14, 15


def bench(server, test, pipe, n):
    """One redis-benchmark run: (requests/s, the server's CPU microseconds
    per request over the run). The CPU time is what the server process
    itself spent, so it holds on a loaded machine where requests/s do not."""
    test, _, clients = test.partition("/c")
    reqs = n[pipe] // 10 if clients == "1" else n[pipe]  # one client is slower: fewer requests
    cpu0, tick0 = cpu_seconds(server.proc.pid), ticks_seconds(server.proc.pid)
    out = subprocess.run(["redis-benchmark", "-p", str(server.port), "-c", clients or "50", "-P", str(pipe), "-n", str(reqs),
                          "-r", "100000", "-t", test, "--csv"], capture_output=True, text=True).stdout
    spent = cpu_seconds(server.proc.pid) - cpu0
    if spent < 0:
        spent = ticks_seconds(server.proc.pid) - tick0
    cpu = spent * 1e6 / reqs
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if len(f) > 1 and f[0] != "test":
            return float(f[1]), cpu
    return float("nan"), cpu


def throughput():
    configs = [Server("engram-redis pmem (/dev/shm)", "engram", SHM, durability="pmem"),
               Server("engram-redis wal (disk)", "engram", DISK, durability="wal"),
               Server("redis AOF always (disk)", "redis", DISK, "always"),
               Server("redis AOF everysec (disk)", "redis", DISK, "everysec"),
               Server("redis AOF always (/dev/shm)", "redis", SHM, "always"),
               Server("redis persistence off", "redis", SHM, "off")]
    if BEFORE:
        configs[2:2] = [Server(PMEM_BEFORE, "engram", SHM, durability="pmem", binary=BEFORE),
                        Server(WAL_BEFORE, "engram", DISK, durability="wal", binary=BEFORE)]
    res, cpu = {}, {}
    try:
        for s in configs:
            s.start()
        for rnd in range(ROUNDS):
            for test in TESTS:
                for pipe in (1, 16):
                    for s in configs:
                        rps, us = bench(s, test, pipe, N)
                        res.setdefault((s.name, test, pipe), []).append(rps)
                        cpu.setdefault((s.name, test, pipe), []).append(us)
            print(f"round {rnd + 1}/{ROUNDS} done", flush=True)
    finally:
        for s in configs:
            s.clean()
    med = lambda d: {k: statistics.median(v) for k, v in d.items()}
    return [s.name for s in configs], med(res), med(cpu)


def fill(port):
    proto = tempfile.NamedTemporaryFile(delete=False, dir=SHM)
    with proto:
        for i in range(KEYS):
            k, v = f"key:{i:012d}", f"value-{i}"
            proto.write(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${len(v)}\r\n{v}\r\n".encode())
    with open(proto.name, "rb") as f:
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=f, capture_output=True, check=True)
    os.unlink(proto.name)


class EagerGcServer(Server):
    """engram-redis with --recovery-gc eager (the heap collected in the open)."""

    def argv(self):
        return super().argv() + ["--recovery-gc", "eager"]


def gc_finished(port, t0):
    """Seconds from t0 until INFO persistence no longer says the recovery GC is pending."""
    while True:
        r = subprocess.run(["redis-cli", "-p", str(port), "info", "persistence"], capture_output=True, text=True).stdout
        if "engram_recovery_gc:pending" not in r:
            return time.perf_counter() - t0
        time.sleep(0.01)


def restart():
    cases = [("engram-redis pmem, clean shutdown", "engram", SHM, None, False),
             ("engram-redis pmem, after kill -9", "engram", SHM, None, True),
             ("engram-redis pmem, after kill -9, --recovery-gc eager", "engram-eager", SHM, None, True),
             ("engram-redis wal (disk), clean shutdown", "engram", DISK, None, False),
             ("engram-redis wal (disk), after kill -9", "engram", DISK, None, True),
             ("redis-server loading its AOF (disk)", "redis", DISK, "everysec", False),
             ("redis-server loading its RDB (disk)", "redis", DISK, "rdb", False)]
    out = []
    for name, kind, fs, mode, kill in cases:
        dur = "auto" if not kind.startswith("engram") else ("pmem" if fs == SHM else "wal")
        s = (EagerGcServer if kind == "engram-eager" else Server)(name, "engram" if kind.startswith("engram") else kind, fs, mode, durability=dur)
        try:
            t0 = time.perf_counter()
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
                t1 = time.perf_counter()
                pong, get = s.start()
                # engram after a kill: until the background recovery GC is done
                # (so the next kill interrupts no GC); redis: no such phase
                done = gc_finished(s.port, t1) if kill and kind.startswith("engram") else None
                times.append((pong, get, done))
            dones = [t[2] for t in times if t[2] is not None]
            out.append((name, filled, statistics.median(t[0] for t in times), statistics.median(t[1] for t in times),
                        statistics.median(dones) if dones else None))
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


def header():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[0]
    fsline = subprocess.run(["df", "-T", DISK], capture_output=True, text=True).stdout.splitlines()[-1].split()
    ver = subprocess.run(['redis-server', '--version'], capture_output=True, text=True).stdout.split()[2][2:]
    flags = " ".join(a if not a.startswith("--before=") else "--before=" + os.path.basename(a[9:]) for a in sys.argv[3:])
    return ("# engram-redis vs redis-server 7.0\n\n"
            f"`make bench-redis` (`go/cmd/engram-redis/bench.py{' ' + flags if flags else ''}`), "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {os.cpu_count()} cores ({cpu}), "
            f"load average {load} at the end (a shared machine: other builds ran), "
            f"disk: {fsline[1]} on {fsline[0]}, /dev/shm: tmpfs. engram-redis built with the release "
            f"FFI library; Debian's redis-server {ver}.\n\n"
            "Durability: engram-redis acknowledges a write after its batch's region committed: in pmem mode "
            "(pool on /dev/shm, `--durability pmem`) flush + fence; in wal mode (pool on the disk, the "
            "default there) the region's record is appended to the pool's write-ahead log and fdatasync'ed "
            "once per batch, the batch holding every request waiting when the executor took it (group "
            "commit across clients). redis-server with `appendfsync always` fsyncs its AOF once per "
            "event-loop turn before replying; `everysec` may lose the last second; off loses everything "
            "since start.\n\n")


def ratio(x, y):
    return f"{x / y:.2f}" if x > 0 and y > 0 else "-"


def cpu_md(names, cpu, cols, head):
    """The server's CPU time per request, and its ratio to redis's."""
    f = ["\n### Server CPU time per request (microseconds, median of the rounds)\n\n"
         "On-CPU time of the server process (user + system, all threads: /proc/PID/task/*/schedstat) over one redis-benchmark run, "
         "divided by its requests. On a shared 2-core machine requests/s swing with the other load; the "
         "CPU the server spends per request does much less, so this is the comparison that holds there "
         "(it leaves out waiting: an fdatasync's latency is not CPU time).\n\n",
         "| configuration " + head]
    for n in names:
        f.append(f"| {n} | " + " | ".join(f"{cpu[(n, t, p)]:.1f}" for t, p in cols) + " |\n")
    f.append("\nCPU per request, redis-server / engram-redis (above 1: engram-redis spends less):\n\n| " + head)
    for a, b in RATIOS + ([(PMEM_BEFORE, "redis persistence off"), (WAL_BEFORE, "redis AOF always (disk)")] if BEFORE else []):
        f.append(f"| {b} / {a} | " + " | ".join(ratio(cpu[(b, t, p)], cpu[(a, t, p)]) for t, p in cols) + " |\n")
    if BEFORE:
        f.append("\nCPU per request, before / after this change (above 1: the change saves CPU):\n\n| " + head)
        for a, b in [("engram-redis pmem (/dev/shm)", PMEM_BEFORE), ("engram-redis wal (disk)", WAL_BEFORE)]:
            f.append(f"| {b} / {a} | " + " | ".join(ratio(cpu[(b, t, p)], cpu[(a, t, p)]) for t, p in cols) + " |\n")
    return "".join(f)


PMEM_BEFORE = "engram-redis pmem, before (/dev/shm)"
WAL_BEFORE = "engram-redis wal, before (disk)"
RATIOS = [("engram-redis pmem (/dev/shm)", "redis persistence off"),
          ("engram-redis pmem (/dev/shm)", "redis AOF always (/dev/shm)"),
          ("engram-redis wal (disk)", "redis AOF always (disk)"),
          ("engram-redis wal (disk)", "redis AOF everysec (disk)")]


def throughput_md(names, res, cpu, have_plot):
    f = [f"## Throughput (requests/s, median of {ROUNDS} interleaved rounds)\n\n",
         f"redis-benchmark -c 50 -r 100000 (/c1: -c 1, a tenth of the requests), -n {N[1]} (pipeline 1) "
         f"and {N[16]} (pipeline 16). redis-benchmark writes the same 3-byte value (`xxx`) every time: once a key "
         f"holds it, a SET, an MSET pair or an HSET field of it stores nothing in engram-redis (`storesNothing`; "
         f"redis-server writes anyway), so SET, MSET and HSET here price a lookup and a compare more than a write "
         f"(docs/redis.md, \"Command execution\", gives the in-process cost with changing values).\n\n"]
    cols = [(t, p) for p in (1, 16) for t in TESTS]
    head = "| " + " | ".join(f"{t.upper()} P{p}" for t, p in cols) + " |\n|---|" + "---:|" * len(cols) + "\n"
    f.append("| configuration " + head)
    for n in names:
        f.append(f"| {n} | " + " | ".join(f"{res[(n, t, p)]:,.0f}" for t, p in cols) + " |\n")
    f.append("\nRatios engram-redis / redis-server:\n\n| " + head)
    for a, b in RATIOS + ([(PMEM_BEFORE, "redis persistence off"), (WAL_BEFORE, "redis AOF always (disk)")] if BEFORE else []):
        f.append(f"| {a} / {b} | " + " | ".join(f"{res[(a, t, p)] / res[(b, t, p)]:.2f}" for t, p in cols) + " |\n")
    if have_plot:
        f.append("\n![throughput](redis.png)\n")
    f.append(cpu_md(names, cpu, cols, head))
    return "".join(f)


def restart_md(rs):
    f = [f"## Restart with {KEYS:,} keys (median of {ROUNDS})\n\n",
         "Process start to the first `+PONG`, and to the first successful GET of an existing key. "
         "Each pool is filled with `redis-cli --pipe` by the server itself, in the mode it then restarts in. "
         "After a kill -9 engram-redis answers while its recovery GC runs in the background (the default); "
         "the last column is when INFO persistence stopped saying `engram_recovery_gc:pending` "
         "(polled with redis-cli every 10 ms). `--recovery-gc eager` collects in the open, before the first reply.\n\n",
         "| case | fill (redis-cli --pipe) s | first PONG ms | first GET ms | recovery GC done ms |\n|---|---:|---:|---:|---:|\n"]
    for name, filled, pong, get, done in rs:
        d = f"{done * 1000:.1f}" if done is not None else "-"
        f.append(f"| {name} | {filled:.1f} | {pong * 1000:.1f} | {get * 1000:.1f} | {d} |\n")
    rows = {r[0]: r for r in rs}
    aof, rdb = rows.get("redis-server loading its AOF (disk)"), rows.get("redis-server loading its RDB (disk)")
    if aof and rdb:
        f.append("\nRatios (redis-server's load to engram-redis's first GET, higher is faster):\n\n"
                 "| case | vs AOF load | vs RDB load |\n|---|---:|---:|\n")
        for r in rs:
            if r[0].startswith("engram"):
                f.append(f"| {r[0]} | {aof[3] / r[3]:.0f}x | {rdb[3] / r[3]:.0f}x |\n")
    return "".join(f)


def old_section(path, title):
    """The section of the existing file starting at '## title' (to the next
    '## ' heading), marked as from an earlier run; '' if there is none."""
    try:
        text = open(path).read()
    except OSError:
        return ""
    i = text.find("\n## " + title)
    if i < 0:
        return ""
    j = text.find("\n## ", i + 1)
    body = text[i + 1:] if j < 0 else text[i + 1:j + 1]
    first, _, rest = body.partition("\n")
    if rest.lstrip("\n").startswith("_"):
        return body  # already says which run it is from
    return f"{first}\n\n_From an earlier run of this benchmark (this regeneration ran only the other part)._\n{rest}"


def kept_sections(path):
    """The existing file's '## Before/after ...' sections (hand-written
    before/after measurements, abbench.py), kept as they are at the end."""
    try:
        text = open(path).read()
    except OSError:
        return ""
    out, i = [], text.find("\n## Before/after")
    while i >= 0:
        j = text.find("\n## ", i + 1)
        out.append(text[i + 1:] if j < 0 else text[i + 1:j + 1])
        i = text.find("\n## Before/after", i + 1)
    return "".join(out)


def main():
    os.makedirs(DISK, exist_ok=True)
    os.makedirs(OUT, exist_ok=True)
    md = os.path.join(OUT, "redis.md")
    parts = []
    if RUN_THROUGHPUT:
        names, res, cpu = throughput()
        parts.append(throughput_md(names, res, cpu, plot(names, res, os.path.join(OUT, "redis.png"))))
    else:
        parts.append(old_section(md, "Throughput"))
    if RUN_RESTART:
        parts.append(restart_md(restart()))
    else:
        parts.append(old_section(md, "Restart"))
    # Hand-measured sections (they say so in their first line) are kept.
    parts.append(old_section(md, "Front end"))
    parts.append(kept_sections(md))
    text = header() + "\n".join(p.rstrip("\n") + "\n" for p in parts if p)
    with open(md, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
