// warm_test.go: warm.go's passes reach, for every key, the entry the
// table's own lookup (pDict.find) finds, in a table that is growing
// (two tables, part moved) and in one that is not, for present and absent
// keys; and warmRequest survives commands with odd key positions.
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
