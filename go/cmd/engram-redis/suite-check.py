#!/usr/bin/env python3
"""suite-check.py: the pass criterion of Redis's own test suite (suite.sh).

  suite-check.py skipfile SKIPLIST UNIT   print UNIT's skipped test names
                                          (runtest's --skipfile format)
  suite-check.py check SKIPLIST ROOT UNIT...

`check` reads ROOT/{real,engram}-<unit>.log, prints passed / failed /
skipped per unit for redis-server and engram-redis side by side, and exits
1 unless every test redis-server passed (counted per name: loops run one
name several times) also passed on engram-redis or is in SKIPLIST, and
engram-redis's run of the unit ended without an exception. SKIPLIST lines:
`unit | test name | reason`; `#` starts a comment. An entry that no longer
names a test redis-server passes is reported as stale (and fails the check,
so the list stays as short as it can be).
"""
import collections
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LINE = re.compile(r"^\[(ok|err|skip|exception)\]: (.*?)(?: \(\d+ ms\))?$")


def skiplist(path):
    """(unit, name) -> reason for every entry of the skip list."""
    out = {}
    for raw in open(path, encoding="utf-8"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        unit, name, reason = (f.strip() for f in line.split(" | ", 2))
        out[(unit, name)] = reason
    return out


def results(path):
    """Counters of passed / failed / skipped names, and whether the run
    stopped at an exception."""
    got = {"ok": collections.Counter(), "err": collections.Counter(),
           "skip": collections.Counter()}
    exception = False
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return got, True
    for raw in text.splitlines():
        m = LINE.match(ANSI.sub("", raw))
        if not m:
            continue
        kind, name = m.groups()
        if kind == "exception":
            exception = True
            continue
        if kind == "err":
            name = re.sub(r" in tests/\S+$", "", name)
        got[kind][name] += 1
    return got, exception


def check(skip_path, root, units):
    skips = skiplist(skip_path)
    ok = True
    print("| unit | redis-server passed / failed | engram-redis passed / failed"
          " / skipped (listed) |\n|---|---|---|")
    problems = []
    for unit in units:
        tag = unit.replace("/", "_")
        real, _ = results(f"{root}/real-{tag}.log")
        eng, exc = results(f"{root}/engram-{tag}.log")
        for name, n in sorted(real["ok"].items()):
            missing = n - eng["ok"][name]
            if missing > 0 and (unit, name) not in skips:
                problems.append(f"{unit}: '{name}' passed on redis-server, "
                                f"not on engram-redis ({missing} of {n})")
        for (u, name) in sorted(skips):
            if u == unit and real["ok"][name] == 0:
                problems.append(f"{unit}: stale skip entry '{name}' "
                                "(redis-server did not pass it)")
        if exc:
            problems.append(f"{unit}: engram-redis's run stopped at an exception")
        note = " (stopped by an exception)" if exc else ""
        print(f"| {unit} | {sum(real['ok'].values())} / {sum(real['err'].values())}"
              f" | {sum(eng['ok'].values())} / {sum(eng['err'].values())}"
              f" / {sum(eng['skip'].values())}{note} |")
    for p in problems:
        print("FAIL:", p)
        ok = False
    print("suite check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv):
    if len(argv) == 4 and argv[1] == "skipfile":
        for (unit, name) in skiplist(argv[2]):
            if unit == argv[3]:
                print(name)
        return 0
    if len(argv) >= 5 and argv[1] == "check":
        return check(argv[2], argv[3], argv[4:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
