#!/usr/bin/env python3
"""redispy.py BIN: drives engram-redis with the Python `redis` package
(redis-py, from PyPI): starts BIN on a free port with a pool in a temp dir,
runs strings, pipelines, MULTI/EXEC with WATCH, hashes, lists, sets, sorted
sets, blocking pops, pub/sub, DUMP/RESTORE, RESP3 and a restart, and exits
non-zero on the first mismatch."""
import os, shutil, socket, subprocess, sys, tempfile, threading, time

import redis


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(binary, port, pool):
    p = subprocess.Popen([binary, "--port", str(port), "--pool", pool],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port, decode_responses=True)
    for _ in range(400):
        try:
            if r.ping():
                return p, r
        except redis.ConnectionError:
            time.sleep(0.025)
    raise SystemExit("engram-redis did not start")


def check(got, want, what):
    if got != want:
        raise SystemExit(f"{what}: got {got!r}, want {want!r}")


def main():
    binary = sys.argv[1]
    d = tempfile.mkdtemp(prefix="engram-redis-py.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    port, pool = free_port(), os.path.join(d, "py.pool")
    proc, r = start(binary, port, pool)
    try:
        check(r.set("greeting", "hello", ex=100), True, "SET EX")
        check(r.get("greeting"), "hello", "GET")
        check(0 < r.ttl("greeting") <= 100, True, "TTL")
        check(r.incrbyfloat("f", 1.5), 1.5, "INCRBYFLOAT")
        check(r.mset({"a": 1, "b": 2}), True, "MSET")
        check(r.mget("a", "b", "nope"), ["1", "2", None], "MGET")
        pipe = r.pipeline(transaction=False)
        for i in range(100):
            pipe.rpush("list", i)
        check(pipe.execute()[-1], 100, "pipelined RPUSH")
        check(r.lrange("list", 0, 2), ["0", "1", "2"], "LRANGE")
        check(r.lindex("list", -1), "99", "LINDEX")
        check(r.object("encoding", "list"), "quicklist", "list encoding")
        with r.pipeline() as p:  # WATCH / MULTI / EXEC
            p.watch("counter")
            p.multi()
            p.incr("counter")
            p.incr("counter")
            check(p.execute(), [1, 2], "MULTI/EXEC")
        check(r.hset("h", mapping={f"f{i}": i for i in range(600)}), 600, "HSET mapping")
        check(r.hget("h", "f599"), "599", "HGET")
        check(r.object("encoding", "h"), "hashtable", "big hash encoding")
        check(r.hincrby("h", "f1", 10), 11, "HINCRBY")
        check(r.sadd("s", *range(10)), 10, "SADD")
        check(r.object("encoding", "s"), "intset", "set encoding")
        check(r.smembers("s"), {str(i) for i in range(10)}, "SMEMBERS")
        check(r.zadd("z", {f"m{i}": i for i in range(200)}), 200, "ZADD")
        check(r.object("encoding", "z"), "skiplist", "big zset encoding")
        check(r.zrange("z", 0, 1, withscores=True), [("m0", 0.0), ("m1", 1.0)], "ZRANGE WITHSCORES")
        check(r.zrangebyscore("z", 10, "(13"), ["m10", "m11", "m12"], "ZRANGEBYSCORE")
        check(r.zrank("z", "m150"), 150, "ZRANK")
        check(r.zpopmax("z"), [("m199", 199.0)], "ZPOPMAX")
        got = []
        t = threading.Thread(target=lambda: got.append(redis.Redis(port=port, decode_responses=True).blpop("q", 5)))
        t.start()
        time.sleep(0.2)
        r.rpush("q", "job")
        t.join()
        check(got, [("q", "job")], "BLPOP woken by RPUSH")
        ps = r.pubsub()
        ps.subscribe("ch")
        check(ps.get_message(timeout=2)["type"], "subscribe", "SUBSCRIBE")
        check(r.publish("ch", "hi"), 1, "PUBLISH")
        check(ps.get_message(timeout=2)["data"], "hi", "message")
        ps.close()
        raw = redis.Redis(port=port)
        check(raw.restore("z2", 0, raw.dump("z")), b"OK", "DUMP/RESTORE")
        check(r.zcard("z2"), 199, "restored ZCARD")
        r3 = redis.Redis(port=port, protocol=3, decode_responses=True)
        check(r3.hgetall("h")["f2"], "2", "RESP3 HGETALL")
        check(r3.zscore("z", "m5"), 5.0, "RESP3 ZSCORE")
        try:
            r.lpush("greeting", "x")
            raise SystemExit("LPUSH on a string did not fail")
        except redis.ResponseError as e:
            check(str(e).startswith("WRONGTYPE"), True, "WRONGTYPE")
        keys = r.dbsize()
        proc.terminate()
        proc.wait()
        proc, r = start(binary, port, pool)
        check(r.dbsize(), keys, "DBSIZE after restart")
        check(r.zrank("z", "m150"), 150, "ZRANK after restart")
        check(r.llen("list"), 100, "LLEN after restart")
        print(f"redis-py {redis.__version__}: ok ({keys} keys kept across a restart)")
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
