#!/usr/bin/env python3
"""gen-commands.py PORT: regenerates go/internal/redis/commands.json, the
table COMMAND INFO and COMMAND DOCS answer from, from a running Redis 7.0.15
(Debian's redis-server) on 127.0.0.1:PORT.

For every command engram-redis registers (the reg("name", ...) calls in
go/internal/redis/*.go) it stores the server's RESP3 reply to `COMMAND INFO
name` and `COMMAND DOCS name` as tagged JSON: [type, value] with the RESP3
type byte ('*' array, '%' map as a flat list, '~' set, '+' simple, '$' bulk,
':' integer, '_' null), so engram-redis can render it in RESP2 or RESP3
(maps and sets become arrays in RESP2, as Redis's own replies do).
TestCommandTable checks the table against the dispatch table (every command
present, same arity and key positions) and TestCommandInfoDocs compares
COMMAND INFO / DOCS with redis-server for every command.

Run: redis-server --port 16390 --save '' & python3 gen-commands.py 16390
"""
import glob
import json
import os
import re
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "..", "..", "internal", "redis")


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()[:-2]
        t, v = chr(line[0]), line[1:].decode()
        if t in "+-":
            return [t, v]
        if t == ":":
            return [t, int(v)]
        if t == "_":
            return ["_", None]
        if t == "$":
            n = int(v)
            if n < 0:
                return ["_", None]
            data = self.f.read(n + 2)[:-2]
            return ["$", data.decode()]
        if t in "*~>":
            n = int(v)
            return [t, [self.read() for _ in range(n)]]
        if t == "%":
            n = int(v)
            return ["%", [self.read() for _ in range(2 * n)]]
        raise ValueError("unexpected RESP type %r" % t)


def names():
    found = set()
    for path in glob.glob(os.path.join(PKG, "*.go")):
        if path.endswith("_test.go"):
            continue
        found.update(re.findall(r'\breg\("([a-z_]+)"', open(path).read()))
    return sorted(found)


def main():
    c = Conn(int(sys.argv[1]))
    c.call("HELLO", "3")
    table = {}
    for n in names():
        info = c.call("COMMAND", "INFO", n)[1][0]
        docs = c.call("COMMAND", "DOCS", n)[1]
        if info[0] == "_":
            print("not a Redis 7.0 command:", n, file=sys.stderr)
            continue
        # docs: the map's flat list, the name and then its docs
        table[n] = {"info": info, "docs": docs[1] if len(docs) == 2 else ["_", None]}
    out = os.path.join(PKG, "commands.json")
    with open(out, "w") as f:
        json.dump(table, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print("wrote", out, len(table), "commands")


if __name__ == "__main__":
    main()
