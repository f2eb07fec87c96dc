// zwarm_test.go: zwarm.go's lock-step walks end where the skiplist's own
// walk (zslInsert's, stop) ends, on a set with many equal scores, for
// members present and absent; and warmRequest survives sorted-set
// commands with odd arguments on a skiplist key.
package redis

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	engram "github.com/engram-pm/engram-go"
)

// zslPred is the level-0 predecessor of (s, m): where zslInsert's walk
// ends.
func zslPred(c *pColl, s float64, m []byte) *pZNode {
	n := c.ZHead
	for i := int(c.ZLevel) - 1; i >= 0; i-- {
		for l := n.lv(i); !stop(l.Fwd, s, m); l = n.lv(i) {
			n = l.Fwd
		}
	}
	return n
}

func TestZWarmWalksWhereZAddGoes(t *testing.T) {
	s, c := start(t, tmpDir(t)+"/zw.pool", 0)
	key := func(i int) string { return "m" + strconv.Itoa(i) }
	var args []any
	for i := 0; i < 300; i++ { // past zset-max-listpack-entries: a skiplist
		args = append(args, "ZADD", "z", i%50, key(i))
	}
	for i := 0; i < len(args); i += 4 {
		if err := c.Do(context.Background(), args[i:i+4]...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	_, e := s.root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
	z := e.Coll
	if z == nil || z.ZHead == nil {
		t.Fatal("z is not a skiplist")
	}
	r := rand.New(rand.NewPCG(5, 6))
	err := s.pool.Txn(func(tx *engram.Tx) error {
		for i := 300; i < 3000; i++ {
			if _, err := z.zadd(tx, []byte(key(i)), float64(r.IntN(300))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 200; round++ {
		var buf [zwarmMax]zwalk
		ws := buf[:0]
		for k := 0; k < 16; k++ {
			m := []byte(key(r.IntN(3300))) // a tenth absent
			l := zlookup{c: z, m: m, z: float64(r.IntN(310)) - 5, zset: true}
			l.n = z.zfind(m)
			l.found = l.n != nil
			ws = addZWalks(ws, &l)
		}
		want := make([]*pZNode, len(ws))
		for k, w := range ws {
			want[k] = zslPred(z, w.s, w.m)
		}
		walkZ(ws)
		for k, w := range ws {
			if w.i != -1 || w.n != want[k] {
				t.Fatalf("round %d walk %d toward (%v, %q): ended at %p level %d, the skiplist's walk at %p", round, k, w.s, w.m, w.n, w.i, want[k])
			}
		}
	}
	// Odd sorted-set commands on the skiplist key: no score, a bad one,
	// INCR, a member only, other keys' types.
	cl := &client{}
	odd := &request{c: cl, cmds: [][][]byte{
		{[]byte("zadd"), []byte("z"), []byte("nan?"), []byte("m1")}, {[]byte("zadd"), []byte("z")},
		{[]byte("zadd"), []byte("z"), []byte("m1")}, {[]byte("zadd"), []byte("z"), []byte("incr"), []byte("3"), []byte("m2")},
		{[]byte("zincrby"), []byte("z"), []byte("2"), []byte("m3")}, {[]byte("zrem"), []byte("z"), []byte("m4"), []byte("m5")},
		{[]byte("hset"), []byte("z"), []byte("m6"), []byte("v")}, {[]byte("zadd"), []byte("z"), []byte("-inf"), []byte("nosuch")},
		{[]byte("zadd"), []byte("z"), []byte("+inf"), []byte("m7")},
	}}
	if err := s.pool.Txn(func(tx *engram.Tx) error { return s.warmRequest(tx, odd, lookupCommands(nil, odd.cmds)) }); err != nil {
		t.Fatal(err)
	}
}
