// zwarm_test.go: zwarm.go's lock-step walks end where the skiplist's own
// walk (zslInsert's, stop) ends, on a set with many equal scores, for
// members present and absent; a move's ranges logged ahead (zprelog)
// cover every range its own log takes when the list does not change in
// between; and warmRequest survives sorted-set commands with odd
// arguments on a skiplist key.
package redis

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
	goredis "github.com/redis/go-redis/v9"
)

// zslPred is the level-0 predecessor of (s, m): where zslInsert's walk
// ends.
func zslPred(c *pColl, s float64, m []byte) *pZNode {
	n := c.ZHead
	for i := int(c.ZLevel) - 1; i >= 0; i-- {
		for l := n.lv(i); !stop(l, s, m); l = n.lv(i) {
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

// zsetWithTies is a server whose key "z" is a skiplist of 3,000 members
// m<i> with scores 0..299 (ten per score): the walks meet many ties.
func zsetWithTies(t *testing.T) (*Server, *pColl) {
	s, c := start(t, tmpDir(t)+"/zp.pool", 0)
	for i := 0; i < 300; i++ {
		if err := c.ZAdd(context.Background(), "z", goredis.Z{Score: float64(i % 50), Member: "m" + strconv.Itoa(i)}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.execMu.Lock()
	t.Cleanup(s.execMu.Unlock)
	_, e := s.root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
	z := e.Coll
	if z == nil || z.ZHead == nil {
		t.Fatal("z is not a skiplist")
	}
	r := rand.New(rand.NewPCG(7, 8))
	err := s.pool.Txn(func(tx *engram.Tx) error {
		for i := 300; i < 3000; i++ {
			if _, err := z.zadd(tx, []byte("m"+strconv.Itoa(i)), float64(r.IntN(300))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, z
}

// moveLogged is what zaddAt logs to give x the score s, as moveAt finds
// it (address, length; the node's range first), but c itself (the list's
// level changing), and x's level.
func moveLogged(c *pColl, x *pZNode, s float64) ([][2]uint64, int) {
	node := func(level int) [2]uint64 {
		p, n := moveRange(x, level)
		return [2]uint64{uint64(p), uint64(n)}
	}
	var del, ins [zMaxLevel]*pZNode
	var rank [zMaxLevel]int64
	c.movePaths(x, s, &del, &ins, &rank)
	level := levelOn(&del, x, int(c.ZLevel))
	var runs levelRuns
	runs.add(&del, level)
	runs.add(&ins, level)
	out := [][2]uint64{node(level)}
	for _, r := range runs.r[:runs.k] {
		p, n := linkRun(r.n, r.lo, r.hi)
		out = append(out, [2]uint64{uint64(p), uint64(n)})
	}
	return out, level
}

// covered is whether pairs holds a range that starts where r starts and
// is no shorter (what Tx.LogBatch finds logged ahead).
func covered(pairs []uint64, r [2]uint64) bool {
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i] == r[0] && pairs[i+1] >= r[1] {
			return true
		}
	}
	return false
}

// zprelogOne is what zprelog logs ahead for one ZADD of m to s on z.
func zprelogOne(t *testing.T, z *pColl, m []byte, s float64) []uint64 {
	refs := []warmRef{{found: true, e: &pEntry{Coll: z}, f: m, z: s, zset: true}}
	pairs, _ := zprelog(nil, refs, nil, new(zwarmBuf))
	if !refs[0].zdone {
		t.Fatal("zprelog did not take the ref")
	}
	return pairs
}

// TestZPrelogCoversAMove: for 3,000 ZADDs, a seventh of new members
// (newCovered), the rest of existing ones (moves, a fifth rescored in
// place, some to the score they hold), what zprelog logs ahead covers
// every range the ZADD's own log takes (its node's score and levels, the
// links on its levels) unless its node has zpathLevels levels or more.
func TestZPrelogCoversAMove(t *testing.T) {
	s, z := zsetWithTies(t)
	r := rand.New(rand.NewPCG(9, 10))
	var moves, tall, news int
	err := s.pool.Txn(func(tx *engram.Tx) error {
		for k := 0; k < 3000; k++ {
			sc := float64(r.IntN(310)) - 5
			if k%7 == 0 {
				news += newCovered(t, z, []byte("n"+strconv.Itoa(k)), sc)
				if _, err := z.zadd(tx, []byte("n"+strconv.Itoa(k)), sc); err != nil {
					return err
				}
				continue
			}
			m := []byte("m" + strconv.Itoa(r.IntN(3000)))
			x := z.zfind(m)
			if next := x.lv(0).Fwd; k%5 == 0 && next != nil && next.Score > x.Score {
				sc = (x.Score + next.Score) / 2 // its place kept
			}
			pairs := zprelogOne(t, z, m, sc)
			if x.Score == sc {
				if len(pairs) != 0 {
					t.Fatalf("%s keeps its score %v: logged ahead %v", m, sc, pairs)
				}
				continue
			}
			moves++
			want, level := moveLogged(z, x, sc)
			if level >= zpathLevels {
				tall++
				want = nil // its level is not known: nothing is guessed
			}
			for _, w := range want {
				if !covered(pairs, w) {
					t.Fatalf("move %d: %s (level %d) %v -> %v: %v is not logged ahead (%v; its log: %v)", k, m, level, x.Score, sc, w, pairs, want)
				}
			}
			if _, err := z.zadd(tx, m, sc); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if moves < 2000 || tall > moves/20 || news < 20 {
		t.Fatalf("%d moves, %d of nodes of zpathLevels levels or more; %d new members guessed", moves, tall, news)
	}
}

// newCovered checks what zprelog logs ahead for a ZADD of the new member
// m at s on z: what zslLinkAt logs for a node of one level, unless the
// table grows (then nothing is guessed). It returns 1 if it was guessed.
func newCovered(t *testing.T, z *pColl, m []byte, s float64) int {
	t.Helper()
	pairs := zprelogOne(t, z, m, s)
	d := z.ZDict
	if d.RehashIdx >= 0 || d.Used >= int64(len(d.T0)) {
		return 0
	}
	p := &zslPred(z, s, m).L[0]
	for _, w := range [][2]uint64{{addrOf(p), 16}, {addrOf(z), uint64(unsafe.Sizeof(*z))}, {addrOf(d.insertSlot(hashKey(m))), 8}, {addrOf(&d.Used), 8}} {
		if !covered(pairs, w) {
			t.Fatalf("new %s at %v: %v is not logged ahead (%v)", m, s, w, pairs)
		}
	}
	return 1
}

// TestParseScore: parseScore's integer path gives what parseFloat gives.
func TestParseScore(t *testing.T) {
	for _, s := range []string{"0", "-0", "000000012345", "99999", "-42", "123456789012345", "1234567890123456",
		"-", "", "1.5", "+3", "1e3", "inf", "-inf", "nan", "12a", "0x10", " 1", "--1", "9007199254740993"} {
		got, gok := parseScore([]byte(s))
		want, wok := parseFloat([]byte(s))
		if gok != wok || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("%q: parseScore %v %v, parseFloat %v %v", s, got, gok, want, wok)
		}
	}
}
