// warm_test.go: warm.go's passes reach, for every key, the entry the
// table's own lookup (pDict.find) finds, in a table that is growing
// (two tables, part moved) and in one that is not, for present and absent
// keys; and warmRequest survives commands with odd key positions. The
// key hints warming leaves for the commands' lookups hold each command's
// first key's hash and serve only that argument.
package redis

import (
	"strconv"
	"testing"

	engram "github.com/engram-pm/engram-go"
)

func TestWarmFindsWhatFindFinds(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: tmpDir(t) + "/w.pool"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := s.root.DBs[0]
	key := func(i int) []byte { return []byte("key:" + strconv.Itoa(i)) }
	rehashing := 0
	for n := 0; n < 3000; n++ {
		if err := s.pool.Txn(func(tx *engram.Tx) error {
			_, err := d.add(tx, key(n), tString, []byte("v"+strconv.Itoa(n)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n%37 != 0 {
			continue
		}
		if d.RehashIdx >= 0 {
			rehashing++
		}
		var refs []warmRef
		for i := 0; i < n+50; i++ { // the last 49 are absent
			refs = append(refs, warmRef{d: d, k: key(i), h: hashKey(key(i))})
		}
		walkRefs(refs)
		for i, ref := range refs {
			_, e := d.find(ref.k, ref.h)
			if ref.found != (e != nil) || (e != nil && ref.e != e) {
				t.Fatalf("%d keys (rehash index %d): key %d: warm found %v (%p), find %p", n+1, d.RehashIdx, i, ref.found, ref.e, e)
			}
		}
	}
	if rehashing == 0 {
		t.Fatal("no check ran while the table was growing")
	}
	// Odd commands: no keys, keys past the end, unknown, empty values.
	var args []any
	for i := 0; i < 600; i++ {
		args = append(args, "f"+strconv.Itoa(i), "")
	}
	c := &client{}
	r := &request{c: c, cmds: [][][]byte{
		{[]byte("get"), key(1)}, {[]byte("mset"), key(2)}, {[]byte("zadd")}, {[]byte("nosuch"), key(3)},
		{[]byte("hset"), key(4), []byte("f")}, {[]byte("ping")}, {[]byte("mget"), key(5), key(99999)},
		{[]byte("zincrby"), key(6)}, {[]byte("set"), []byte(""), []byte("")},
	}}
	warm := func(r *request) {
		if err := s.pool.Txn(func(tx *engram.Tx) error { return s.warmRequest(tx, r, lookupCommands(nil, r.cmds)) }); err != nil {
			t.Fatal(err)
		}
	}
	warm(r)
	// One key: not warmed.
	warm(&request{c: c, cmds: [][][]byte{{[]byte("get"), key(1)}}})
	c.db = numDBs // out of range: skipped
	warm(r)
}

func TestKeyHints(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: tmpDir(t) + "/h.pool"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k1, k2, k3 := []byte("alpha"), []byte("beta"), []byte("gamma")
	r := &request{c: &client{}, cmds: [][][]byte{
		{[]byte("incr"), k1}, {[]byte("ping")}, {[]byte("mset"), k2, []byte("v"), k3, []byte("w")},
	}}
	if err := s.pool.Txn(func(tx *engram.Tx) error { return s.warmRequest(tx, r, lookupCommands(nil, r.cmds)) }); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{k1, nil, k2}
	for i, k := range want {
		s.hint = s.hintAt(i)
		if k == nil {
			if s.hint != (keyHint{}) {
				t.Fatalf("command %d (no key): hint %+v", i, s.hint)
			}
			continue
		}
		if s.hint.h != hashKey(k) || s.hashOf(k) != hashKey(k) {
			t.Fatalf("command %d: hint %x, hashKey %x", i, s.hint.h, hashKey(k))
		}
		// The same bytes elsewhere, a prefix of the argument, and another
		// key are hashed, not hinted.
		same, other := append([]byte(nil), k...), []byte("delta")
		s.hint.h++
		if s.hashOf(same) != hashKey(k) || s.hashOf(k[:1]) != hashKey(k[:1]) || s.hashOf(other) != hashKey(other) {
			t.Fatalf("command %d: a hint served another argument", i)
		}
	}
	if s.hintAt(len(want)) != (keyHint{}) {
		t.Fatal("a hint past the request's commands")
	}
	s.dropHints()
	if len(s.keyHints) != 0 || s.hint != (keyHint{}) {
		t.Fatal("hints kept after the request")
	}
}

// TestLoneWarm: warmLone leaves each request of one command naming one
// key its command and its key's hash (loneWarm), which its run takes
// instead of looking up and hashing again; other requests get none. The
// batch's replies are those of its commands.
func TestLoneWarm(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: tmpDir(t) + "/lone.pool"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &client{id: 1, proto: 2, authed: true}
	cmd := func(args ...string) [][]byte {
		var out [][]byte
		for _, a := range args {
			out = append(out, []byte(a))
		}
		return out
	}
	reqs := []*request{
		{c: c, cmds: [][][]byte{cmd("INCR", "k1")}},
		{c: c, cmds: [][][]byte{cmd("set", "k2", "v")}},
		{c: c, cmds: [][][]byte{cmd("PING")}},
		{c: c, cmds: [][][]byte{cmd("INCR", "k1"), cmd("GET", "k2")}},
		{c: c, cmds: [][][]byte{cmd("INCRBY", "k1", "5")}},
	}
	err = s.pool.Txn(func(tx *engram.Tx) error {
		if err := s.warmLone(tx, reqs); err != nil {
			return err
		}
		for i, r := range reqs {
			lone := len(r.cmds) == 1 && len(r.cmds[0]) > 1
			if got := r.lone.def != nil; got != lone {
				t.Fatalf("request %d: lone warming %v, want %v", i, got, lone)
			}
			if !lone {
				continue
			}
			k := r.cmds[0][1]
			if r.lone.def != lookupCommand(r.cmds[0][0]) || r.lone.hint.h != hashKey(k) || r.lone.hint.p != &k[0] {
				t.Fatalf("request %d: lone %+v", i, r.lone)
			}
			if err := s.warmRequest(tx, r, r.lone.defs(nil, r.cmds)); err != nil {
				return err
			}
			if s.hintAt(0) != r.lone.hint || s.hintAt(1) != (keyHint{}) {
				t.Fatalf("request %d: hints %+v", i, s.keyHints)
			}
			s.dropHints()
		}
		return s.runRequests(tx, reqs)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{":1\r\n", "+OK\r\n", "+PONG\r\n", ":2\r\n$1\r\nv\r\n", ":7\r\n"}
	for i, r := range reqs {
		if got := string(r.out.b); got != want[i] {
			t.Errorf("request %d: reply %q, want %q", i, got, want[i])
		}
	}
}
