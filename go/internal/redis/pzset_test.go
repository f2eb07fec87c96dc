// pzset_test.go: the skiplist sorted set (pzset.go) under random ZADD
// (new members, moved members: the node reused), ZINCRBY, ZREM and
// ZREMRANGEBYRANK against a Go model: after every command the skiplist's
// invariants hold (order, spans, no back links or tail, length, the table's
// scores), ZRANGE WITHSCORES and ZRANK
// agree with the model, and again after a reopen; and kill -9 during a
// stream of ZADDs that move members (TestZSetMoveKill).
package redis

import (
	"context"
	"errors"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
	goredis "github.com/redis/go-redis/v9"
)

// checkSkiplist checks pzset.go's invariants on key k's skiplist.
func checkSkiplist(t *testing.T, s *Server, k string) {
	t.Helper()
	_, e := s.root.DBs[0].find([]byte(k), hashKey([]byte(k)))
	if e == nil || e.Coll == nil {
		return
	}
	c := e.Coll
	var nodes []*pZNode
	var prev *pZNode
	if err := linkScoresErr(c); err != nil {
		t.Fatal(err)
	}
	for n := c.ZHead.lv(0).Fwd; n != nil; n = n.lv(0).Fwd {
		if n.Spare != 0 {
			t.Fatalf("node %q: Spare is not 0", n.member())
		}
		if prev != nil && !(prev.Score < n.Score || (prev.Score == n.Score && string(prev.member()) < string(n.member()))) {
			t.Fatalf("order: %q %v before %q %v", prev.member(), prev.Score, n.member(), n.Score)
		}
		if c.zfind(n.member()) != n || n.Hash != hashKey(n.member()) {
			t.Fatalf("node %q %v: the table disagrees", n.member(), n.Score)
		}
		nodes, prev = append(nodes, n), n
	}
	if c.ZTail != nil || int64(len(nodes)) != c.Len || c.ZDict.Used != c.Len || zdictCount(c.ZDict) != c.Len {
		t.Fatalf("tail/len: %d nodes, Len %d, table %d (%d)", len(nodes), c.Len, c.ZDict.Used, zdictCount(c.ZDict))
	}
	// Spans are exact while the set is ranked; one that is not (after a
	// reopen or a rollback) gets them computed again first.
	if err := s.pool.Txn(func(tx *engram.Tx) error { c.ranks(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	rank := map[*pZNode]int64{c.ZHead: 0}
	for i, n := range nodes {
		rank[n] = int64(i + 1)
	}
	level := map[*pZNode]int{c.ZHead: zMaxLevel}
	for i := 0; i < int(c.ZLevel); i++ {
		for n := c.ZHead; ; {
			l := n.lv(i)
			if l.Fwd == nil {
				break // a span to the end is not read (as in Redis)
			}
			if want := rank[l.Fwd] - rank[n]; l.Span != want {
				t.Fatalf("level %d at rank %d: span %d, want %d", i, rank[n], l.Span, want)
			}
			n = l.Fwd
			level[n] = i + 1
		}
	}
	checkNodeSizes(t, s, level)
}

// checkNodeSizes checks that each node is linked on exactly the levels
// its pool array holds (2+L elements: pZNode), so no link lies past it.
func checkNodeSizes(t *testing.T, s *Server, level map[*pZNode]int) {
	t.Helper()
	for n, l := range level {
		got, err := s.pool.ObjectCount(unsafe.Pointer(n))
		if err != nil || got != zNodeHead+l {
			t.Fatalf("node %q: linked on %d levels, its pool array has %d elements (%v), want %d", n.member(), l, got, err, zNodeHead+l)
		}
	}
}

// zdictCount is the number of nodes in d's chains, each checked to be
// in the bucket of its hash (-1 if one is not).
func zdictCount(d *pZDict) int64 {
	var n int64
	tabs := [][]*pZNode{d.T0}
	if d.RehashIdx >= 0 {
		tabs = append(tabs, d.T1)
	}
	for t, tab := range tabs {
		for i, b := range tab {
			for x := b; x != nil; x = x.Next {
				if x.Hash&uint64(len(tab)-1) != uint64(i) || (t == 0 && int64(i) < d.RehashIdx) {
					return -1
				}
				n++
			}
		}
	}
	return n
}

func TestZSetSkiplistRandom(t *testing.T) {
	for seed := uint64(3); seed < 6; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { zsetRandom(t, seed) })
	}
}

// modelEl is one member of a model sorted set.
type modelEl struct {
	m string
	s float64
}

// modelOrder is model's members in the set's order (score, then member).
func modelOrder(model map[string]float64) []modelEl {
	var els []modelEl
	for m, sc := range model {
		els = append(els, modelEl{m, sc})
	}
	sort.Slice(els, func(a, b int) bool {
		return els[a].s < els[b].s || (els[a].s == els[b].s && els[a].m < els[b].m)
	})
	return els
}

// zsetRandom runs one seed's stream of commands (TestZSetSkiplistRandom).
func zsetRandom(t *testing.T, seed uint64) {
	ctx := context.Background()
	dir := tmpDir(t)
	s, c := start(t, dir+"/z.pool", 0)
	model := map[string]float64{}
	r := rand.New(rand.NewPCG(seed, 4))
	check := func(i int) {
		checkSkiplist(t, s, "z")
		want := modelOrder(model)
		got := c.ZRangeWithScores(ctx, "z", 0, -1).Val()
		if len(got) != len(want) {
			t.Fatalf("op %d: %d elements, model %d", i, len(got), len(want))
		}
		for j := range got {
			if got[j].Member != want[j].m || got[j].Score != want[j].s {
				t.Fatalf("op %d rank %d: %v %v, model %v %v", i, j, got[j].Member, got[j].Score, want[j].m, want[j].s)
			}
		}
		if len(want) > 0 {
			j := r.IntN(len(want))
			if rk := c.ZRank(ctx, "z", want[j].m).Val(); rk != int64(j) {
				t.Fatalf("op %d: ZRANK %s %d, want %d", i, want[j].m, rk, j)
			}
		}
	}
	ops := func(from, to int, checkAt func(i int) bool) {
		for i := from; i < to; i++ {
			zsetRandomOp(ctx, c, r, model)
			if checkAt(i) {
				check(i)
			}
		}
	}
	ops(0, 3000, func(i int) bool { return i%25 == 0 || i > 2900 })
	c.Close()
	s.Close()
	// After a reopen the set is not ranked (its spans may be stale): the
	// writes keep what is logged, and the rank reads compute the spans
	// again first.
	s, c = start(t, dir+"/z.pool", 0)
	ops(3000, 3200, func(i int) bool { return false })
	check(-1)
	ops(3200, 3300, func(i int) bool { return i%25 == 0 })
	c.Close()
	s.Close()
	s, c = start(t, dir+"/z.pool", 0)
	check(-2)
	c.Close()
	s.Close()
}

// zsetRandomOp is one command of zsetRandom's stream, applied to model too.
func zsetRandomOp(ctx context.Context, c *goredis.Client, r *rand.Rand, model map[string]float64) {
	{
		m := "m" + strconv.Itoa(r.IntN(400))
		sc := float64(r.IntN(60)) // equal scores: ordered by member
		switch op := r.IntN(10); {
		case op < 6:
			c.ZAdd(ctx, "z", goredis.Z{Score: sc, Member: m}, goredis.Z{Score: sc + 1, Member: m + "x"})
			model[m], model[m+"x"] = sc, sc+1
		case op < 8:
			model[m] += sc
			c.ZIncrBy(ctx, "z", sc, m)
		case op < 9:
			delete(model, m)
			c.ZRem(ctx, "z", m)
		default:
			got := c.ZRange(ctx, "z", 0, 1).Val()
			for _, g := range got {
				delete(model, g)
			}
			c.ZRemRangeByRank(ctx, "z", 0, 1)
		}
	}
}

// TestZSetRanksAfterRollback: a region that moves, adds and removes
// members of a skiplist (changing spans, which are not logged) and then
// rolls back leaves the set as it was and not ranked; ZRANK and ZRANGE by
// rank are exact (the spans computed again), and so are they after
// further writes.
func TestZSetRanksAfterRollback(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, tmpDir(t)+"/z.pool", 0)
	model := map[string]float64{}
	for i := 0; i < 300; i++ {
		m := "m" + strconv.Itoa(i)
		model[m] = float64(i)
		c.ZAdd(ctx, "z", goredis.Z{Score: float64(i), Member: m})
	}
	_, e := s.root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
	if e == nil || e.Coll == nil {
		t.Fatal("z is not a skiplist")
	}
	z := e.Coll
	boom := errors.New("roll back")
	s.execMu.Lock()
	err := s.pool.Txn(func(tx *engram.Tx) error {
		if !z.ranked(tx) {
			return errors.New("a set the server just wrote is not ranked")
		}
		for i := 0; i < 100; i++ {
			if _, err := z.zadd(tx, []byte("m"+strconv.Itoa(i*3)), float64(1000-i)); err != nil {
				return err
			}
		}
		if _, err := z.zadd(tx, []byte("new"), -5); err != nil {
			return err
		}
		if _, err := z.zrem(tx, []byte("m299")); err != nil {
			return err
		}
		return boom
	})
	s.execMu.Unlock()
	if !errors.Is(err, boom) {
		t.Fatalf("region: %v, want the rollback", err)
	}
	if err := s.pool.Txn(func(tx *engram.Tx) error {
		if z.ranked(tx) {
			return errors.New("ranked after a rollback that changed its spans")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantRanks := func() {
		t.Helper()
		checkSkiplist(t, s, "z")
		for _, m := range []string{"m0", "m7", "m150", "m298", "m299"} {
			want := int64(0)
			for om, os := range model {
				if os < model[m] || (os == model[m] && om < m) {
					want++
				}
			}
			if got := c.ZRank(ctx, "z", m).Val(); got != want {
				t.Fatalf("ZRANK %s: %d, want %d", m, got, want)
			}
		}
		if got := c.ZRange(ctx, "z", 10, 10).Val(); len(got) != 1 {
			t.Fatalf("ZRANGE 10 10: %v", got)
		}
	}
	wantRanks()
	for i := 0; i < 50; i++ {
		m := "m" + strconv.Itoa(i*5)
		model[m] = float64(500 + i)
		c.ZAdd(ctx, "z", goredis.Z{Score: model[m], Member: m})
	}
	wantRanks()
}

// zsetKills is how many times TestZSetMoveKill kills the server.
const zsetKills = 8

// zop is one ZADD of TestZSetMoveKill.
type zop struct {
	m string
	s float64
}

// TestZSetMoveKill kills the server during pipelines of ZADDs that mostly
// move members (the node reused, unlink and link logged in one batch), so
// that most kills land inside a region: after each restart the set is the
// acknowledged one with a prefix of the pipeline in flight applied (a
// pipeline may span several batches), read forwards, backwards and by
// rank (the spans, computed again after the restart).
func TestZSetMoveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	zsetKill(t, tmpDir(t), func(gr *rand.Rand, k, i int) string { return "m" + strconv.Itoa(gr.IntN(300)) })
}

// TestZSetNewMemberKill is TestZSetMoveKill with ZADDs that add members
// (each a new name; the compact encoding is left in the first pipeline):
// the table link and the skiplist link of a new member are logged in one
// batch (zslLinkAt), and the member table grows and rehashes meanwhile;
// in tmpfs (pmem) and wal mode.
func TestZSetNewMemberKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, mode := range []string{"tmpfs", "wal"} {
		t.Run(mode, func(t *testing.T) {
			n := 0
			fresh := func(gr *rand.Rand, k, i int) string { n++; return "n" + strconv.Itoa(n) }
			if mode == "wal" {
				zsetKill(t, diskDir(t), fresh, "--durability", "wal")
				return
			}
			zsetKill(t, tmpDir(t), fresh)
		})
	}
}

// zsetKill kills a server on a pool in dir (started with args)
// zsetKills times during pipelines of ZADDs of key z, member(gr, k, i)
// being the i-th member of run k, and checks the set after each restart.
func zsetKill(t *testing.T, dir string, member func(gr *rand.Rand, k, i int) string, args ...string) {
	ctx := context.Background()
	bin := buildServer(t)
	r := rand.New(rand.NewPCG(7, 8))
	model := map[string]float64{}
	done := 0
	run := func() (*exec.Cmd, *goredis.Client) { return runServer(t, bin, filepath.Join(dir, "z.pool"), args...) }
	for k := 0; k < lives(zsetKills); k++ {
		cmd, c := run()
		stop := make(chan []zop, 1)
		var stopped error
		gr := rand.New(rand.NewPCG(9, uint64(k)))
		go func() {
			for {
				ops := make([]zop, 200)
				p := c.Pipeline()
				for i := range ops {
					ops[i] = zop{member(gr, k, i), float64(gr.IntN(100))}
					p.ZAdd(ctx, "z", goredis.Z{Score: ops[i].s, Member: ops[i].m})
				}
				if _, err := p.Exec(ctx); err != nil {
					stopped = err
					stop <- ops // in flight at the kill: a prefix may have committed
					return
				}
				for _, o := range ops {
					model[o.m] = o.s
				}
				done += len(ops)
			}
		}()
		time.Sleep(time.Duration(20+r.IntN(60)) * time.Millisecond)
		killServer(t, k, cmd)
		inflight := <-stop
		writerStopped(t, k, stopped)
		c.Close()
		cmd, c = run()
		got := zsetRead(t, ctx, c)
		for i := 0; ; i++ {
			if zsetEqual(got, model) {
				break
			}
			if i == len(inflight) {
				t.Fatalf("kill %d: the sorted set (%d members) is not the acknowledged one (%d) with any prefix of the pipeline in flight", k, len(got), len(model))
			}
			model[inflight[i].m] = inflight[i].s
		}
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	if done == 0 {
		t.Fatal("no ZADD was acknowledged")
	}
	t.Logf("%d kills during %d acknowledged ZADDs on a %d-member sorted set", lives(zsetKills), done, len(model))
}

// runServer starts the built server bin with pool and args (on a port of
// its own, ownServer) and returns it with a client that does not retry
// (the kill tests).
func runServer(t *testing.T, bin string, pool string, args ...string) (*exec.Cmd, *goredis.Client) {
	cmd, c, _ := ownServer(t, bin, append([]string{"--pool", pool}, args...)...)
	return cmd, c
}

// zsetRead reads key z forwards and checks it against a backward read and
// reads by rank.
func zsetRead(t *testing.T, ctx context.Context, c *goredis.Client) []goredis.Z {
	fw := c.ZRangeWithScores(ctx, "z", 0, -1).Val()
	bw := c.ZRevRange(ctx, "z", 0, -1).Val()
	if len(bw) != len(fw) {
		t.Fatalf("ZREVRANGE has %d members, ZRANGE %d", len(bw), len(fw))
	}
	for i := range fw {
		if bw[len(fw)-1-i] != fw[i].Member {
			t.Fatalf("ZREVRANGE differs from ZRANGE at %d", i)
		}
	}
	for i := 0; i < len(fw); i += 37 {
		if got := c.ZRange(ctx, "z", int64(i), int64(i)).Val(); len(got) != 1 || got[0] != fw[i].Member {
			t.Fatalf("ZRANGE %d %d: %v, want %v", i, i, got, fw[i].Member)
		}
	}
	zsetTableAgrees(t, ctx, c, fw)
	return fw
}

// zsetTableAgrees checks that key z's member table (ZSCAN walks it) holds
// exactly the members and scores of fw (ZRANGE: the skiplist).
func zsetTableAgrees(t *testing.T, ctx context.Context, c *goredis.Client, fw []goredis.Z) {
	table := map[string]string{}
	for cur := uint64(0); ; {
		kv, next, err := c.ZScan(ctx, "z", cur, "", 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			table[kv[i]] = kv[i+1]
		}
		if cur = next; cur == 0 {
			break
		}
	}
	if len(table) != len(fw) {
		t.Fatalf("ZSCAN (the member table) has %d members, ZRANGE (the skiplist) %d", len(table), len(fw))
	}
	for _, z := range fw {
		if table[z.Member.(string)] != strconv.FormatFloat(z.Score, 'f', -1, 64) {
			t.Fatalf("member %v: score %v in the skiplist, %q in the table", z.Member, z.Score, table[z.Member.(string)])
		}
	}
}

// zsetEqual is whether got (ascending) holds exactly model.
func zsetEqual(got []goredis.Z, model map[string]float64) bool {
	if len(got) != len(model) {
		return false
	}
	for i, z := range got {
		s, ok := model[z.Member.(string)]
		if !ok || s != z.Score || (i > 0 && (got[i-1].Score > z.Score || (got[i-1].Score == z.Score && got[i-1].Member.(string) >= z.Member.(string)))) {
			return false
		}
	}
	return true
}

// TestOldLayoutRefused: a pool of layout version 1 ("engram-redis", the
// fixed-size skiplist nodes before redis8zn), 2 ("engram-redis/2", a
// table entry beside each node before redis8zm), 3 ("engram-redis/3",
// logged spans before redis8zz), 4 ("engram-redis/4", lists of element
// slots before redis9lpush) 5 ("engram-redis/5", keys' entries without
// inline bytes before redis10key), 6 ("engram-redis/6", skiplist links
// without their next node's score before redis11zset) or 7
// ("engram-redis/7", hash and set fields without inline entries and a
// level's span before its link's score, before redis13hset and
// redis13zadd) does not open; the error
// is ErrWrongLayout and names both versions. The pool is made as the old
// version made it (layout name, the keyspace root); its bytes are never
// read.
func TestOldLayoutRefused(t *testing.T) {
	for _, old := range []struct{ name, version string }{{"engram-redis", "version 1"}, {"engram-redis/2", "version 2"}, {"engram-redis/3", "version 3"}, {"engram-redis/4", "version 4"}, {"engram-redis/5", "version 5"}, {"engram-redis/6", "version 6"}, {"engram-redis/7", "version 7"}} {
		path := filepath.Join(tmpDir(t), "old.pool")
		pool, err := engram.Create(path, &engram.Options{Layout: old.name, Durability: engram.Pmem})
		if err != nil {
			t.Fatal(err)
		}
		if err := pool.Txn(func(tx *engram.Tx) error { _, err := openRoot(tx, pool); return err }); err != nil {
			t.Fatal(err)
		}
		if err := pool.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Addr: "127.0.0.1:0", Pool: path, Durability: engram.Pmem})
		if err == nil {
			s.Close()
			t.Fatalf("a %s pool opened", old.version)
		}
		if !errors.Is(err, engram.ErrWrongLayout) {
			t.Fatalf("error %v, want ErrWrongLayout", err)
		}
		for _, want := range []string{"version 8", `"engram-redis/8"`, old.version, strconv.Quote(old.name)} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %s", err, want)
			}
		}
		t.Log(err)
	}

	// A pool of another program's layout keeps the engine's message (the
	// layout it found), without the old versions' advice.
	other := filepath.Join(tmpDir(t), "other.pool")
	op, err := engram.Create(other, &engram.Options{Layout: "engram-go", Durability: engram.Pmem})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: other, Durability: engram.Pmem})
	if err == nil {
		s.Close()
		t.Fatal("an engram-go pool opened")
	}
	if !errors.Is(err, engram.ErrWrongLayout) || strings.Contains(err.Error(), "version 1") || strings.Contains(err.Error(), "version 2") || strings.Contains(err.Error(), "version 3") || !strings.Contains(err.Error(), `"engram-go"`) {
		t.Fatalf("error %q: want ErrWrongLayout naming \"engram-go\" and no old-version advice", err)
	}
}
