// largeval_test.go: a large value reaches the pool with one copy. The
// write commands take a value's bytes from the parsed request and copy
// them into the pool; nothing on the way copies them into the Go heap
// (docs/redis.md, checklist row "large values copied at most once per
// write"). The test counts the Go heap bytes each write allocates.
package redis

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"

	engram "github.com/engram-pm/engram-go"
)

// TestLargeValueCopiedOnce runs each write command with a 1 MiB value,
// each on a new key in a region of its own, and fails when a write
// allocates more than a quarter of the value's size in the Go heap: a
// copy of the value outside the pool.
func TestLargeValueCopiedOnce(t *testing.T) {
	d, err := os.MkdirTemp("/dev/shm", "engram-redis-largeval-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	s, err := New(Config{Pool: d + "/l.pool", Durability: engram.Pmem, MaxMemory: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	uncheck(s.pool) // checked mode walks logged values at commit (tests only)

	const size = 1 << 20
	val := bytes.Repeat([]byte("v"), size)
	b := func(s string) []byte { return []byte(s) }
	cases := []struct {
		name string
		cmd  func(key []byte) [][]byte
	}{
		{"SET", func(k []byte) [][]byte { return [][]byte{b("SET"), k, val} }},
		{"SET EX", func(k []byte) [][]byte { return [][]byte{b("SET"), k, val, b("EX"), b("100")} }},
		{"SETNX", func(k []byte) [][]byte { return [][]byte{b("SETNX"), k, val} }},
		{"GETSET", func(k []byte) [][]byte { return [][]byte{b("GETSET"), k, val} }},
		{"MSET", func(k []byte) [][]byte { return [][]byte{b("MSET"), k, val} }},
		{"APPEND", func(k []byte) [][]byte { return [][]byte{b("APPEND"), k, val} }},
		{"SETRANGE", func(k []byte) [][]byte { return [][]byte{b("SETRANGE"), k, b("0"), val} }},
		{"HSET", func(k []byte) [][]byte { return [][]byte{b("HSET"), k, b("field"), val} }},
		{"LPUSH", func(k []byte) [][]byte { return [][]byte{b("LPUSH"), k, val} }},
		{"RPUSH", func(k []byte) [][]byte { return [][]byte{b("RPUSH"), k, val} }},
		{"SADD", func(k []byte) [][]byte { return [][]byte{b("SADD"), k, val} }},
		{"ZADD", func(k []byte) [][]byte { return [][]byte{b("ZADD"), k, b("1.5"), val} }},
	}
	c := &client{id: 1, proto: 2, authed: true}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	n := 0
	write := func(name string, cmd [][]byte) {
		r := request{c: c, cmds: [][][]byte{cmd}}
		err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, &r) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if bytes.HasPrefix(r.out.b, []byte("-")) {
			t.Fatalf("%s: error reply %q", name, r.out.b)
		}
		n++
	}
	for _, tc := range cases {
		// One write first: the server's own buffers and tables reach
		// their size, as they would on a long-running server.
		write(tc.name, tc.cmd([]byte(fmt.Sprintf("warm:%s", tc.name))))
		const rounds = 6
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for i := 0; i < rounds; i++ {
			write(tc.name, tc.cmd([]byte(fmt.Sprintf("large:%s:%d", tc.name, i))))
		}
		runtime.ReadMemStats(&m1)
		per := (m1.TotalAlloc - m0.TotalAlloc) / rounds
		if per > size/4 {
			t.Errorf("%s of a %d-byte value allocated %d bytes of Go heap per write: the value was copied outside the pool", tc.name, size, per)
		}
	}
	// Every value is in the pool, whole.
	for _, tc := range cases[:3] {
		k := []byte(fmt.Sprintf("large:%s:%d", tc.name, 0))
		r := request{c: c, cmds: [][][]byte{{b("STRLEN"), k}}}
		if err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, &r) }); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(":%d\r\n", size); string(r.out.b) != want {
			t.Errorf("STRLEN after %s: %q, want %q", tc.name, r.out.b, want)
		}
	}
}
