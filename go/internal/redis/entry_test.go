package redis

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

// inprocServer is a server on a new pmem pool, run by the test itself
// (the executor's lock held): run executes one command as one region and
// returns its reply; entry is a key's entry in db 0 (nil if absent).
func inprocServer(t *testing.T) (s *Server, run func(args ...string) string, entry func(k string) *pEntry) {
	t.Helper()
	s, err := New(Config{Pool: tmpDir(t) + "/e.pool", Durability: engram.Pmem, MaxMemory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := &client{id: 1, proto: 2, authed: true}
	s.execMu.Lock()
	t.Cleanup(func() { s.execMu.Unlock(); s.Close() })
	run = func(args ...string) string {
		cmd := make([][]byte, len(args))
		for i, a := range args {
			cmd[i] = []byte(a)
		}
		r := request{c: c, cmds: [][][]byte{cmd}}
		if err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, &r) }); err != nil {
			t.Fatal(err)
		}
		return string(r.out.b)
	}
	entry = func(k string) *pEntry {
		var e *pEntry
		_ = s.pool.Txn(func(tx *engram.Tx) error {
			e, _ = (&ctx{s: s, tx: tx, c: c}).lookup([]byte(k))
			return nil
		})
		return e
	}
	return s, run, entry
}

// TestInlineEntries: keys around inlineCap with values around what fits
// after them are inline exactly when they fit (entry.go), read back whole
// through SET, GET, APPEND (the value moves out, raw), a short SET (it
// moves back in), INCR, RENAME to a long key and back, and DUMP/RESTORE;
// a new short key is one pool object.
func TestInlineEntries(t *testing.T) {
	s, run, entry := inprocServer(t)
	lookup := entry
	entry = func(k string) *pEntry {
		e := lookup(k)
		if e == nil {
			t.Fatalf("%q: no entry", k)
		}
		return e
	}
	bulk := func(v string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(v), v) }
	get := func(k, want string) {
		t.Helper()
		if got := run("GET", k); got != bulk(want) {
			t.Fatalf("GET %d-byte key: %q, want %d bytes", len(k), got, len(want))
		}
	}
	for _, kn := range []int{1, 16, 40, 47, 48, 49, 100} {
		for _, vn := range []int{0, 1, 3, 20, 32, 40, 41, 100} {
			k, v := strings.Repeat("k", kn), strings.Repeat("v", vn)
			if got := run("SET", k, v); got != "+OK\r\n" {
				t.Fatalf("SET: %q", got)
			}
			get(k, v)
			e := entry(k)
			if want := kn <= inlineCap && valOff(kn)+vn <= inlineCap; e.valInline() != want {
				t.Fatalf("%d-byte key, %d-byte value: inline %v, want %v", kn, vn, e.valInline(), want)
			}
			if string(e.key()) != k || (kn <= inlineCap) != (e.InCap > 0) {
				t.Fatalf("%d-byte key: key %q, InCap %d", kn, e.key(), e.InCap)
			}
			run("APPEND", k, "ab")
			get(k, v+"ab")
			if got := run("OBJECT", "ENCODING", k); got != bulk("raw") {
				t.Fatalf("after APPEND: %q", got)
			}
			run("SET", k, "x")
			get(k, "x")
			if e := entry(k); valOff(kn)+1 <= inlineCap && (!e.valInline() || cap(e.Val) != 0) {
				t.Fatalf("%d-byte key: a short SET did not move the value back in", kn)
			}
			run("SET", k, "99")
			run("INCR", k)
			get(k, "100")
			long := k + strings.Repeat("L", inlineCap)
			run("RENAME", k, long)
			get(long, "100")
			run("RENAME", long, k)
			get(k, "100")
			dump := run("DUMP", k)
			n := strings.Index(dump, "\r\n")
			run("DEL", k)
			if got := run("RESTORE", k, "0", dump[n+2:len(dump)-2]); got != "+OK\r\n" {
				t.Fatalf("RESTORE: %q", got)
			}
			get(k, "100")
			run("DEL", k)
		}
	}
	// A new 16-byte key with a counter is one pool object (no key or
	// value array of its own).
	run("INCR", "key:000000012345")
	e := entry("key:000000012345")
	if e.InCap == 0 || !e.valInline() || len(e.Key) != 0 || cap(e.Val) != 0 || string(e.val()) != "1" {
		t.Fatalf("a new counter: InCap %d, Key %d bytes, Val cap %d, value %q", e.InCap, len(e.Key), cap(e.Val), e.val())
	}
	if n, err := s.pool.ObjectCount(unsafe.Pointer(e)); err != nil || n != 1 {
		t.Fatalf("the entry is not one object: %d (%v)", n, err)
	}
}
