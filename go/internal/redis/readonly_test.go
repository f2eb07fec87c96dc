// readonly_test.go: batches of reads run without a region (readonly.go):
// they answer as a region would, show only committed data, and an expired
// key they meet is deleted durably (the batch runs again in a region).
package redis

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	engram "github.com/engram-pm/engram-go"
)

// roHarness runs batches on a server that does not serve (no executor:
// no active expiry), for clients over pipes whose replies it reads.
type roHarness struct {
	t    *testing.T
	s    *Server
	pool string
	cli  map[*client]net.Conn
}

func newROHarness(t *testing.T, pool string) *roHarness {
	t.Helper()
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	h := &roHarness{t: t, s: s, pool: pool, cli: map[*client]net.Conn{}}
	t.Cleanup(func() { h.close() })
	return h
}

func (h *roHarness) close() {
	if h.s != nil {
		h.s.Close()
		h.s = nil
	}
	for _, cc := range h.cli {
		cc.Close()
	}
	clear(h.cli)
}

func (h *roHarness) client(id int64) *client {
	srv, cli := net.Pipe()
	c := &client{id: id, conn: srv, proto: 2, authed: true}
	h.cli[c] = cli
	return c
}

func argv(line string) [][]byte {
	var out [][]byte
	for _, a := range strings.Fields(line) {
		out = append(out, []byte(a))
	}
	return out
}

// batch runs one batch of a request per client (cmds[i] for clients[i],
// commands separated by ";") and returns each client's replies.
func (h *roHarness) batch(clients []*client, cmds ...string) []string {
	h.t.Helper()
	var reqs []*request
	for i, line := range cmds {
		r := &request{c: clients[i]}
		for _, one := range strings.Split(line, ";") {
			r.cmds = append(r.cmds, argv(one))
		}
		reqs = append(reqs, r)
	}
	got := make([]chan string, len(reqs))
	for i, r := range reqs {
		got[i] = make(chan string, 1)
		go func(cc net.Conn, n int, out chan<- string) {
			// One reply per command: read until n replies parsed.
			var b []byte
			buf := make([]byte, 4096)
			for countReplies(b) < n {
				k, err := cc.Read(buf)
				if err != nil {
					break
				}
				b = append(b, buf[:k]...)
			}
			out <- string(b)
		}(h.cli[r.c], len(r.cmds), got[i])
	}
	h.s.execMu.Lock()
	h.s.runBatch(reqs)
	h.s.execMu.Unlock()
	out := make([]string, len(reqs))
	for i := range got {
		select {
		case out[i] = <-got[i]:
		case <-time.After(time.Minute):
			h.t.Fatalf("no replies to %q", cmds[i])
		}
	}
	return out
}

// countReplies counts the whole RESP2 replies at the start of b.
func countReplies(b []byte) int {
	n := 0
	for {
		k := replyLen(b)
		if k <= 0 {
			return n
		}
		b, n = b[k:], n+1
	}
}

// replyLen is the length of the RESP2 reply b starts with (0: incomplete).
func replyLen(b []byte) int {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 {
		return 0
	}
	switch b[0] {
	case '$':
		n, _ := strconv.Atoi(string(b[1:i]))
		if n < 0 {
			return i + 2
		}
		if len(b) < i+2+n+2 {
			return 0
		}
		return i + 2 + n + 2
	case '*':
		n, _ := strconv.Atoi(string(b[1:i]))
		at := i + 2
		for j := 0; j < n; j++ {
			k := replyLen(b[at:])
			if k == 0 {
				return 0
			}
			at += k
		}
		return at
	}
	return i + 2
}

// TestReadOnlyBatch: a batch of reads from several clients runs without a
// region and answers as one would; a batch holding a write does not.
func TestReadOnlyBatch(t *testing.T) {
	h := newROHarness(t, filepath.Join(tmpDir(t), "ro.pool"))
	a, b := h.client(1), h.client(2)
	h.batch([]*client{a}, "SET k v;HSET h f 1;RPUSH l x y")
	before := h.s.stats.readOnly
	got := h.batch([]*client{a, b}, "GET k;MGET k nope;EXISTS k h nope", "HGET h f;LLEN l;TYPE h;TTL k;GET nope")
	want := []string{"$1\r\nv\r\n*2\r\n$1\r\nv\r\n$-1\r\n:2\r\n", "$1\r\n1\r\n:2\r\n+hash\r\n:-1\r\n$-1\r\n"}
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("replies %q, want %q", got, want)
	}
	if h.s.stats.readOnly != before+1 {
		t.Fatalf("read-only batches %d -> %d: the batch of reads ran in a region", before, h.s.stats.readOnly)
	}
	if got := h.batch([]*client{a, b}, "GET k", "SET k w"); got[0] != "$1\r\nv\r\n" || got[1] != "+OK\r\n" {
		t.Fatalf("replies %q", got)
	}
	if h.s.stats.readOnly != before+1 {
		t.Fatal("a batch holding a SET ran without a region")
	}
	if got := h.batch([]*client{b}, "MULTI;GET k"); got[0] != "+OK\r\n+QUEUED\r\n" {
		t.Fatalf("MULTI: %q", got)
	}
	// A regionless command queued in MULTI: queued, and EXEC runs it.
	if got := h.batch([]*client{b}, "GET k"); got[0] != "+QUEUED\r\n" {
		t.Fatalf("GET in MULTI: %q", got)
	}
	if got := h.batch([]*client{b}, "EXEC"); got[0] != "*2\r\n$1\r\nw\r\n$1\r\nw\r\n" {
		t.Fatalf("EXEC: %q", got)
	}
}

// TestReadOnlyBatchSeesCommitted: a write whose region rolls back (its
// command fails) is never shown, by a read in its own batch nor by a
// later read-only batch, which answers the committed value.
func TestReadOnlyBatchSeesCommitted(t *testing.T) {
	reg("test-set-then-fail", 3, "w", k1, func(x *ctx) error {
		if _, err := x.put(x.args[1], tString, x.args[2], false); err != nil {
			return err
		}
		panic("fails after its write")
	})
	t.Cleanup(func() { delete(commands, "test-set-then-fail") })
	h := newROHarness(t, filepath.Join(tmpDir(t), "ro.pool"))
	a, b := h.client(1), h.client(2)
	h.batch([]*client{a}, "SET k committed")
	got := h.batch([]*client{a, b}, "test-set-then-fail k uncommitted", "GET k")
	if !strings.HasPrefix(got[0], "-ERR engram: internal error") || got[1] != "$9\r\ncommitted\r\n" {
		t.Fatalf("replies %q", got)
	}
	before := h.s.stats.readOnly
	if got := h.batch([]*client{b}, "GET k;STRLEN k"); got[0] != "$9\r\ncommitted\r\n:9\r\n" {
		t.Fatalf("read-only GET after the rollback: %q", got)
	}
	if h.s.stats.readOnly != before+1 {
		t.Fatal("the GET ran in a region")
	}
}

// expiredReadsKept sets keys with a 1 ms TTL, reads each (GET, EXISTS,
// TTL, and a GET behind another in a pipeline) in a batch of reads once
// they expired, checks the replies, closes and reopens the pool and
// returns the keys the pool still holds.
func expiredReadsKept(t *testing.T) []string {
	pool := filepath.Join(tmpDir(t), "ro.pool")
	h := newROHarness(t, pool)
	a, b := h.client(1), h.client(2)
	h.batch([]*client{a}, "SET live v;SET g v PX 1;SET e v PX 1;SET t v PX 1;SET p v PX 1")
	time.Sleep(20 * time.Millisecond)
	checks := []struct{ cmds, want string }{
		{"GET g", "$-1\r\n"},
		{"EXISTS e", ":0\r\n"},
		{"TTL t", ":-2\r\n"},
		{"GET live;GET p;GET live", "$1\r\nv\r\n$-1\r\n$1\r\nv\r\n"},
	}
	for _, c := range checks {
		if got := h.batch([]*client{b}, c.cmds); got[0] != c.want {
			t.Fatalf("%s: %q, want %q", c.cmds, got[0], c.want)
		}
	}
	h.close()
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var kept []string
	for _, k := range []string{"g", "e", "t", "p"} {
		// find, not lookup: lookup would delete an expired key itself.
		if _, e := s.root.DBs[0].find([]byte(k), s.hashOf([]byte(k))); e != nil {
			kept = append(kept, k)
		}
	}
	if _, e := s.root.DBs[0].find([]byte("live"), s.hashOf([]byte("live"))); e == nil {
		t.Fatal("the live key is gone")
	}
	return kept
}

// TestReadOnlyExpiryDurable: an expired key a batch of reads meets is
// deleted, and the deletion is in the pool after a reopen.
func TestReadOnlyExpiryDurable(t *testing.T) {
	if kept := expiredReadsKept(t); len(kept) > 0 {
		t.Fatalf("expired keys %v read in read-only batches are still in the pool", kept)
	}
}

// TestReadOnlyExpiryPlanted: with the read-only path answering an expired
// key as gone without the region rerun (plantSkipExpiryFallback), the
// replies are right but the keys stay in the pool: expiredReadsKept sees
// them.
func TestReadOnlyExpiryPlanted(t *testing.T) {
	plantSkipExpiryFallback = true
	defer func() { plantSkipExpiryFallback = false }()
	if kept := expiredReadsKept(t); len(kept) != 4 {
		t.Fatalf("planted: kept %v, want all four expired keys", kept)
	}
}

// TestRegionlessCommandsNilTx runs every regionless command on keys of
// every type with no transaction: each answers exactly as it does in a
// region, or (an expired key) asks for a region; nothing else (no error,
// no panic: a nil Tx used).
func TestRegionlessCommandsNilTx(t *testing.T) {
	h := newROHarness(t, filepath.Join(tmpDir(t), "ro.pool"))
	a := h.client(1)
	big := []string{"HSET hb"}
	for i := 0; i < 300; i++ {
		big = append(big, "f"+strconv.Itoa(i)+" v")
	}
	h.batch([]*client{a}, "SET s hello EX 1000;RPUSH l a b;HSET h f 1;"+strings.Join(big, " ")+";SADD st m;ZADD z 1 m;SET x v PX 1")
	time.Sleep(20 * time.Millisecond)
	forms := map[string][]string{
		"get": {"K"}, "mget": {"K s", "K"}, "strlen": {"K"}, "getrange": {"K 0 -1", "K 1 x"}, "substr": {"K 0 2"},
		"exists": {"K", "K s"}, "type": {"K"}, "ttl": {"K"}, "pttl": {"K"}, "expiretime": {"K"}, "pexpiretime": {"K"},
		"hget": {"K f", "K f7"}, "hmget": {"K f f250 g"}, "hexists": {"K f"}, "hlen": {"K"},
		"llen": {"K"}, "scard": {"K"}, "sismember": {"K m"},
		"dbsize": {""}, "ping": {"", "hi"}, "echo": {"hi"},
	}
	for name := range regionless {
		if commands[name] == nil || !commands[name].regionless || forms[name] == nil {
			t.Fatalf("regionless %q: not a registered regionless command with test forms", name)
		}
	}
	// A command not listed never runs without a region (dispatchCmd).
	for _, line := range []string{"SET s other", "MULTI", "DEL s", "ZSCORE z m"} {
		r := request{c: a, cmds: [][][]byte{argv(line)}}
		h.s.execMu.Lock()
		err := h.s.runRequest(nil, &r)
		h.s.execMu.Unlock()
		if !errors.Is(err, errNeedsRegion) || len(r.out.b) != 0 || a.multi {
			t.Fatalf("%s with no region: %v, reply %q", line, err, r.out.b)
		}
	}
	for name, fs := range forms {
		for _, f := range fs {
			for _, k := range []string{"s", "l", "h", "hb", "st", "z", "nope", "x"} {
				line := strings.TrimSpace(name + " " + strings.ReplaceAll(f, "K", k))
				ro := request{c: a, cmds: [][][]byte{argv(line)}}
				h.s.execMu.Lock()
				err := h.s.runRequest(nil, &ro)
				h.s.execMu.Unlock()
				if k == "x" && errors.Is(err, errNeedsRegion) {
					continue // the expired key (a command that looks it up)
				}
				if k == "x" && name == "get" {
					t.Fatalf("%s with no region: %v, want errNeedsRegion", line, err)
				}
				if err != nil {
					t.Fatalf("%s with no region: %v", line, err)
				}
				rg := request{c: a, cmds: ro.cmds}
				h.s.execMu.Lock()
				err = h.s.pool.Txn(func(tx *engram.Tx) error { return h.s.runRequest(tx, &rg) })
				h.s.execMu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(ro.out.b, rg.out.b) {
					t.Fatalf("%s: %q without a region, %q in one", line, ro.out.b, rg.out.b)
				}
			}
		}
	}
}

// BenchmarkGetP1 is a batch of one GET (a client at pipeline 1) of one of
// 100,000 keys, without the socket write: in a region (the path before
// readonly.go: begin, the command, commit) and without one (runBatch's
// read-only path: the batch check, the client state saved, the command).
// For callgrind's instruction counts (GODEBUG=asyncpreemptoff=1
// GOMAXPROCS=1 GOGC=off, two -test.benchtime lengths).
func BenchmarkGetP1(b *testing.B) {
	for _, mode := range []string{"region", "readonly"} {
		b.Run(mode, func(b *testing.B) {
			// A server that does not serve: no executor, whose expiry
			// tick would add its regions to the counts.
			s := newBenchServer(b)
			c := &client{id: 1, proto: 2, authed: true}
			reqs := make([]request, 1000)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range reqs {
				reqs[i] = request{c: c, cmds: [][][]byte{{[]byte("SET"), benchKey(r), []byte("xxx")}}}
			}
			s.execMu.Lock()
			defer s.execMu.Unlock()
			for i := range reqs {
				if err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, &reqs[i]) }); err != nil {
					b.Fatal(err)
				}
				reqs[i].cmds[0][0] = []byte("GET")
				reqs[i].cmds[0] = reqs[i].cmds[0][:2]
			}
			live := make([]*request, 1)
			b.ResetTimer()
			c0 := cpuNow()
			for i := 0; i < b.N; i++ {
				live[0] = &reqs[i%len(reqs)]
				live[0].out.b = live[0].out.b[:0]
				if mode == "region" {
					if err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, live[0]) }); err != nil {
						b.Fatal(err)
					}
					continue
				}
				saved := []clientState{c.save()}
				if !readOnlyBatch(live) || !s.runReadOnly(live, saved) {
					b.Fatal("the GET did not run without a region")
				}
			}
			b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
