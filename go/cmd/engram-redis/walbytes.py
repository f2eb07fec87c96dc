#!/usr/bin/env python3
"""walbytes.py BIN TEST PIPE N [DIR]: what one request of redis-benchmark's
TEST (zadd, incr, ...) writes into a wal-mode engram-redis's log: bytes,
pieces and undo-entry bytes per request, requests per record. It fills
with 300,000 requests of TEST (-r 100000, P16), restarts the server (a
clean close checkpoints: the log's generation starts empty), runs N
requests at pipeline PIPE (50 clients), kills the server with SIGKILL (no
checkpoint) and reads the log's current generation (the format of
crates/engram/src/wal.rs: a 4 KiB header, then records {magic, pad, salt,
number, payload length, crc, pad} + pieces {pool offset u64, length u32,
pad u32, bytes padded to 8}). ENGRAM_WAL_CHECKPOINT_BYTES is set to 8 GiB
so that no checkpoint runs during the N requests. Pieces of 500 bytes or
more are counted apart: they are the region's undo entries (the log area
written contiguously at a log fence), the rest the new bytes of what it
logged. DIR (default /tmp): where the pool goes (a disk for wal mode)."""
import collections, os, shutil, signal, socket, struct, subprocess, sys, tempfile, time

binary, test, pipe, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = tempfile.mkdtemp(prefix="walbytes.", dir=sys.argv[5] if len(sys.argv) > 5 else "/tmp")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
env = dict(os.environ, ENGRAM_WAL_CHECKPOINT_BYTES=str(8 << 30))
argv = [binary, "--port", str(port), "--pool", d + "/b.pool", "--maxmemory", "2gb", "--durability", "wal"]


def start():
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode != 0:
        time.sleep(0.2)
    return p


def bench(count, pp):
    subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-t", test, "-c", "50", "-r", "100000",
                    "-n", str(count), "-P", str(pp)], capture_output=True, check=True)


try:
    p = start(); bench(300000, 16)
    subprocess.run(["redis-cli", "-p", str(port), "shutdown"], capture_output=True); p.wait()
    p = start(); bench(n, pipe)
    p.send_signal(signal.SIGKILL); p.wait()
    log = open(d + "/b.pool.wal", "rb").read()
finally:
    shutil.rmtree(d, ignore_errors=True)
assert log[:8] == b"ENGRAMWL"
salt = struct.unpack_from("<Q", log, 16)[0]
off, num, recs, rec_bytes = 4096, 1, 0, 0
sizes = collections.Counter()
while off + 40 <= len(log):
    magic, _, sl, number, plen, _, _ = struct.unpack_from("<IIQQQII", log, off)
    if magic != 0x4C524557 or sl != salt or number != num or off + 40 + plen > len(log):
        break
    at, end = off + 40, off + 40 + plen
    while at + 16 <= end:
        ln = struct.unpack_from("<I", log, at + 8)[0]
        sizes[ln] += 1
        at += 16 + (ln + 7) // 8 * 8
    recs += 1; rec_bytes += 40 + plen; off += 40 + plen; num += 1
pieces = sum(sizes.values()); undo = sum(k * v for k, v in sizes.items() if k >= 500)
data = sum(k * v for k, v in sizes.items() if k < 500)
print(f"{test} P{pipe}: {n} requests, {recs} records ({n / max(recs, 1):.1f} requests each), "
      f"{rec_bytes / n:.1f} log bytes per request: undo entries {undo / n:.1f}, new bytes {data / n:.1f}, "
      f"headers {(rec_bytes - undo - data) / n:.1f} ({pieces / n:.2f} pieces)")
print("pieces under 500 bytes by length (per request):",
      ", ".join(f"{k}: {v / n:.2f}" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1]) if k < 500 and v / n >= 0.01))
