// zexplore_test.go: the skiplist's write paths (pzset.go: a member moved,
// a new member linked, a member removed) through the crash explorer: the
// regions run on a traced pool, every crash image the x86 model allows is
// recovered, and each must hold a whole skiplist (order, spans, no back
// links or tail, length, every node linked on exactly the levels its pool
// array holds, the table agreeing) whose members are those of a prefix of
// the regions. A change stored before it is logged shows here as an image
// that is neither. The spans are not logged (pzset.go, ranked): an image
// must not hold a ranked set, and its spans computed again (rerank) must
// be exact.
package redis

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

const zexploreRoot = "zexplore"

// zexploreHolder is the root: the sorted set's collection.
type zexploreHolder struct {
	C *pColl
}

// zsetContents checks c's skiplist (as checkSkiplist does, without a
// testing.T) and returns its members with their scores. p was just
// opened: c must not be ranked; once its level 0 is found in order, its
// spans are computed again (rerank) and checked.
func zsetContents(p *engram.Pool, c *pColl) (map[string]float64, error) {
	got := map[string]float64{}
	rank := map[*pZNode]int64{c.ZHead: 0}
	var prev *pZNode
	if err := linkScoresErr(c); err != nil {
		return nil, err
	}
	for n := c.ZHead.lv(0).Fwd; n != nil; n = n.lv(0).Fwd {
		if n.Spare != 0 {
			return nil, fmt.Errorf("node %q: Spare is not 0", n.member())
		}
		if prev != nil && !(prev.Score < n.Score || (prev.Score == n.Score && string(prev.member()) < string(n.member()))) {
			return nil, fmt.Errorf("order: %q before %q", prev.member(), n.member())
		}
		if c.zfind(n.member()) != n || n.Hash != hashKey(n.member()) {
			return nil, fmt.Errorf("node %q %v: the table disagrees", n.member(), n.Score)
		}
		got[string(n.member())] = n.Score
		rank[n] = int64(len(got))
		prev = n
	}
	if c.ZTail != nil || int64(len(got)) != c.Len || c.ZDict.Used != c.Len || zdictCount(c.ZDict) != c.Len {
		return nil, fmt.Errorf("tail/len: %d nodes, Len %d, table %d (%d)", len(got), c.Len, c.ZDict.Used, zdictCount(c.ZDict))
	}
	err := p.Txn(func(tx *engram.Tx) error {
		if c.ranked(tx) {
			return fmt.Errorf("the set is ranked right after an open: its unlogged spans would be trusted")
		}
		c.rerank(tx)
		return nil
	})
	if err != nil {
		return nil, err
	}
	level := map[*pZNode]int{c.ZHead: zMaxLevel}
	for i := 0; i < int(c.ZLevel); i++ {
		for n, hops := c.ZHead, 0; n.lv(i).Fwd != nil; n, hops = n.lv(i).Fwd, hops+1 {
			if hops > len(got) {
				return nil, fmt.Errorf("level %d: more hops than nodes (a cycle)", i)
			}
			l := n.lv(i)
			if want := rank[l.Fwd] - rank[n]; l.Span != want {
				return nil, fmt.Errorf("level %d at rank %d: span %d, want %d", i, rank[n], l.Span, want)
			}
			level[l.Fwd] = i + 1
		}
	}
	for n, l := range level {
		if k, err := p.ObjectCount(unsafe.Pointer(n)); err != nil || k != zNodeHead+l {
			return nil, fmt.Errorf("node %q: linked on %d levels, its array has %d elements (%v)", n.member(), l, k, err)
		}
	}
	return got, nil
}

// linkScoresErr checks that every link of c holds its next node's score
// (pZLevel.FScore), on every level up to c's, the header's first.
func linkScoresErr(c *pColl) error {
	for i := 0; i < int(c.ZLevel); i++ {
		for n, hops := c.ZHead, int64(0); n.lv(i).Fwd != nil; n, hops = n.lv(i).Fwd, hops+1 {
			if hops > c.Len {
				return fmt.Errorf("level %d: more hops than nodes (a cycle)", i)
			}
			if l := n.lv(i); l.FScore != l.Fwd.Score {
				return fmt.Errorf("level %d: the link to %q holds score %v, the node %v", i, l.Fwd.member(), l.FScore, l.Fwd.Score)
			}
		}
	}
	return nil
}

// zexploreOps is the traced workload: moves of existing members (to
// random scores, so the paths differ), a score changed in place (its rank
// kept: raised and lowered, both found by the move's walk),
// new members, removals, a move of a member to the tail and one to the
// head.
func zexploreOps(r *rand.Rand, members int) []func(tx *engram.Tx, c *pColl, model map[string]float64) error {
	move := func(m string, s float64) func(tx *engram.Tx, c *pColl, model map[string]float64) error {
		return func(tx *engram.Tx, c *pColl, model map[string]float64) error {
			model[m] = s
			_, err := c.zadd(tx, []byte(m), s)
			return err
		}
	}
	rem := func(m string) func(tx *engram.Tx, c *pColl, model map[string]float64) error {
		return func(tx *engram.Tx, c *pColl, model map[string]float64) error {
			delete(model, m)
			_, err := c.zrem(tx, []byte(m))
			return err
		}
	}
	// tallest moves the first node of the top level (the list's level
	// drops while it is unlinked if it is alone there).
	tallest := func(s float64) func(tx *engram.Tx, c *pColl, model map[string]float64) error {
		return func(tx *engram.Tx, c *pColl, model map[string]float64) error {
			m := string(c.ZHead.lv(int(c.ZLevel) - 1).Fwd.member())
			return move(m, s)(tx, c, model)
		}
	}
	// rescore gives m a score between its neighbours' (its place kept),
	// which it checks.
	rescore := func(m string) func(tx *engram.Tx, c *pColl, model map[string]float64) error {
		return func(tx *engram.Tx, c *pColl, model map[string]float64) error {
			x := c.zfind([]byte(m))
			if x == nil || x.lv(0).Fwd == nil {
				return fmt.Errorf("rescore %s: not a member before the tail", m)
			}
			s := (x.Score + x.lv(0).Fwd.Score) / 2
			if !(s > x.Score && s < x.lv(0).Fwd.Score) {
				return fmt.Errorf("rescore %s to %v: its rank would change", m, s)
			}
			return move(m, s)(tx, c, model)
		}
	}
	// lower gives m a score between its predecessor's and its own: its
	// place kept.
	lower := func(m string) func(tx *engram.Tx, c *pColl, model map[string]float64) error {
		return func(tx *engram.Tx, c *pColl, model map[string]float64) error {
			x := c.zfind([]byte(m))
			if x == nil {
				return fmt.Errorf("lower %s: not a member", m)
			}
			p := c.ZHead
			for p.lv(0).Fwd != x {
				p = p.lv(0).Fwd
			}
			s := x.Score - 1
			if p != c.ZHead {
				s = (p.Score + x.Score) / 2
			}
			return move(m, s)(tx, c, model)
		}
	}
	member := func() string { return fmt.Sprintf("m%d", r.IntN(members)) }
	near := r.IntN(members)
	return []func(tx *engram.Tx, c *pColl, model map[string]float64) error{
		move(member(), r.Float64()*100), move(member(), r.Float64()*100),
		move(fmt.Sprintf("m%d", near), float64(near)+1.5), // the paths share all but the lowest levels
		rescore(member()), lower(member()),
		move("new-a", 50.5), move(member(), 1000), move(member(), -1),
		tallest(r.Float64() * 100), tallest(2000),
		rem(member()), move("new-b", r.Float64()*100), move(member(), r.Float64()*100),
	}
}

// exploreZSet builds a set of members members, runs zexploreOps in one
// region each on a traced pool, and explores them.
func exploreZSet(t *testing.T, members int) engram.ExploreReport {
	t.Helper()
	p, tr, dir := tracedPool(t, "z.pool")
	var err error
	model := map[string]float64{}
	var h *zexploreHolder
	err = p.Txn(func(tx *engram.Tx) error {
		if h, err = engram.New[zexploreHolder](tx); err != nil {
			return err
		}
		if h.C, err = newZColl(tx); err != nil {
			return err
		}
		for i := 0; i < members; i++ {
			m, s := fmt.Sprintf("m%d", i), float64(i)
			model[m] = s
			if _, err := h.C.zadd(tx, []byte(m), s); err != nil {
				return err
			}
		}
		return engram.SetRoot(tx, zexploreRoot, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The member table is still growing (pZDict.rehashStep): the traced
	// regions' adds and removal move its buckets.
	growing := h.C.ZDict.RehashIdx >= 0
	states := []map[string]float64{maps.Clone(model)}
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	for _, op := range zexploreOps(rand.New(rand.NewPCG(8, 8)), members) {
		if err := p.Txn(func(tx *engram.Tx) error { return op(tx, h.C, model) }); err != nil {
			t.Fatal(err)
		}
		states = append(states, maps.Clone(model))
	}
	rep := exploreTraced(t, tr, p, dir, func(p *engram.Pool) error {
		h, err := engram.Root[zexploreHolder](p, zexploreRoot)
		if err != nil {
			return err
		}
		got, err := zsetContents(p, h.C)
		if err != nil {
			return err
		}
		for _, st := range states {
			if maps.Equal(got, st) {
				return nil
			}
		}
		return fmt.Errorf("%d members, none of the %d states the regions leave", len(got), len(states))
	})
	if !growing {
		t.Fatalf("the member table of %d members was not growing: the regions moved none of its buckets", members)
	}
	return rep
}

func TestZSetCrashExplorer(t *testing.T) {
	rep := exploreZSet(t, 40)
	t.Logf("%+v", rep)
	if rep.Violations != 0 {
		t.Fatalf("%d violations: %s", rep.Violations, rep.FirstViolation)
	}
}

// TestZSetCrashExplorerPlanted: a move whose place stays that logs only
// its node (plantKeptPlaceLogsNode: as the in-place rescore did before
// the links held their next node's score) leaves its predecessors' link
// scores changed unlogged, which the explorer must find.
func TestZSetCrashExplorerPlanted(t *testing.T) { exploreZSetPlanted(t, &plantKeptPlaceLogsNode) }

// exploreZSetPlanted runs exploreZSet with the plant *plant on and fails
// unless the explorer finds a violation.
func exploreZSetPlanted(t *testing.T, plant *bool) {
	*plant = true
	defer func() { *plant = false }()
	rep := exploreZSet(t, 40)
	if rep.Violations == 0 {
		t.Fatalf("the unlogged link scores were not caught: %+v", rep)
	}
	t.Logf("caught: %d violations, first: %s", rep.Violations, rep.FirstViolation)
}

// TestZSetCrashExplorerPlantedLinkScore: with plantLinkLogsNoScore (a
// one-level link change logs its link but not the score beside it:
// zlog.go cut the logged ranges to the link and its score, one word
// less would be this) the explorer finds a recovered link whose score
// is not its node's.
func TestZSetCrashExplorerPlantedLinkScore(t *testing.T) {
	exploreZSetPlanted(t, &plantLinkLogsNoScore)
}

// tracedPool is a new pool named name in trace mode, its tracer (freed
// when the test ends) and its scratch directory, which the explorer uses
// too: the redis package's crash-explorer tests start from it.
func tracedPool(t *testing.T, name string) (*engram.Pool, *engram.Tracer, string) {
	t.Helper()
	dir := tmpDir(t)
	tr, err := engram.NewTracer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Free() })
	p, err := engram.Create(filepath.Join(dir, name), &engram.Options{Layout: layoutName, Durability: engram.Trace, Tracer: tr, MaxSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return p, tr, dir
}

// exploreTraced stops tr's trace, abandons p and recovers every crash
// image the x86 model allows, each checked by check; the test fails if
// the explorer fails or explored nothing. The caller judges violations.
func exploreTraced(t *testing.T, tr *engram.Tracer, p *engram.Pool, dir string, check func(*engram.Pool) error) engram.ExploreReport {
	t.Helper()
	if _, err := tr.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Abandon(); err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Explore(engram.ExploreOptions{Layout: layoutName, ScratchDir: dir}, check)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Points == 0 || rep.ImagesChecked == 0 {
		t.Fatalf("nothing explored: %+v", rep)
	}
	return rep
}

// zpipeState is db 0's sorted set "z" as its level 0 holds it (member:
// score), checked for order, its table and its length: the state
// exploreServer compares.
func zpipeState(root *pRoot) (map[string]string, error) {
	_, e := root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
	if e == nil || e.Coll == nil || e.Coll.ZHead == nil {
		return nil, fmt.Errorf("z is not a skiplist")
	}
	c := e.Coll
	if err := linkScoresErr(c); err != nil {
		return nil, err
	}
	st := map[string]string{}
	var prev *pZNode
	for n := c.ZHead.lv(0).Fwd; n != nil; n = n.lv(0).Fwd {
		if prev != nil && !(prev.Score < n.Score || (prev.Score == n.Score && string(prev.member()) < string(n.member()))) {
			return nil, fmt.Errorf("order: %q before %q", prev.member(), n.member())
		}
		if c.zfind(n.member()) != n {
			return nil, fmt.Errorf("node %q: the table disagrees", n.member())
		}
		st[string(n.member())] = fmt.Sprint(n.Score)
		prev = n
	}
	if int64(len(st)) != c.Len || c.ZDict.Used != c.Len {
		return nil, fmt.Errorf("%d nodes, Len %d, table %d", len(st), c.Len, c.ZDict.Used)
	}
	return st, nil
}

// zpipeSetup makes z a skiplist of m0..m39 with scores 0..39.
func zpipeSetup() []string {
	lines := []string{"CONFIG SET zset-max-listpack-entries 4"}
	for i := 0; i < 40; i++ {
		lines = append(lines, fmt.Sprintf("ZADD z %d m%d", i, i))
	}
	return lines
}

// zpipeSetupRanked is zpipeSetup with a rank read last: the set keeps
// its spans through its next 40 moves (keepsRanks), so the traced moves
// walk (zslMove's movePaths) instead of taking the warm-up's paths
// (zhint.go, moveHinted: a set no rank read has wanted spans of).
func zpipeSetupRanked() []string {
	return append(zpipeSetup(), "ZRANK z m39")
}

// zpipePipelines are the traced regions: ZADD pipelines as the executor
// runs them (warming, the moves logged ahead: zprelog), with guesses
// that hold (moves, a score raised or lowered in place) and ones that do
// not (a member moved twice, the moves before it changing its paths; a
// ZADD INCR, whose score is not its argument; a new member; a removal
// and a ZINCRBY among them), and one ZADD alone (not warmed).
var zpipePipelines = [][]string{
	{"ZADD z 20.5 m3", "ZADD z 1.5 m30", "ZADD z 7 m11", "ZADD z 100 m0"},
	{"ZADD z 5.5 m5", "ZADD z 9.5 m10", "ZADD z 30.5 m2", "ZADD z 0.5 m2"},
	{"ZADD z 15.5 new1", "ZREM z m7", "ZADD z 33.5 m8", "ZINCRBY z 2 m9", "ZADD z INCR 3 m12", "ZADD z 4.5 m13"},
	{"ZADD z 50 m14"},
	{"ZADD z 3.5 m15", "ZADD z 3.25 m16", "ZADD z 3.75 m17", "ZADD z 16 m15"},
}

func TestZAddPipelineCrashExplorer(t *testing.T) {
	rep := exploreServer(t, zpipeSetup(), zpipePipelines, zpipeState)
	t.Logf("%+v", rep)
}

// TestZAddPipelineCrashExplorerRanked: zpipePipelines on a set that
// keeps its spans (a rank read last in the setup): the moves walk.
func TestZAddPipelineCrashExplorerRanked(t *testing.T) {
	rep := exploreServer(t, zpipeSetupRanked(), zpipePipelines, zpipeState)
	t.Logf("%+v", rep)
}

// TestZAddLoneCrashExplorerRanked: TestZAddLoneCrashExplorer on a set
// that keeps its spans (the moves walk, as above).
func TestZAddLoneCrashExplorerRanked(t *testing.T) {
	rep := exploreLone(t, zpipeSetupRanked(), zpipePipelines, zpipeState)
	t.Logf("%+v", rep)
}

// TestZAddLoneCrashExplorerRankedPlanted is
// TestZAddLoneCrashExplorerPlanted on a set that keeps its spans: the
// walking moves log through the same step (logMove) as the hinted ones,
// and trusting what was logged ahead shows the same way.
func TestZAddLoneCrashExplorerRankedPlanted(t *testing.T) {
	explorePlantedGuess(t, &plantMoveTrustsPrelog, zpipeSetupRanked(), zloneGuessHolds, zloneGuessMisses, zpipeState)
}

// TestZAddLoneCrashExplorer: zpipePipelines' ZADDs as the executor runs
// them at pipeline 1, each a client's request, a region's lone commands
// warmed and logged ahead together (warmLone) before the first runs.
func TestZAddLoneCrashExplorer(t *testing.T) {
	rep := exploreLone(t, zpipeSetup(), zpipePipelines, zpipeState)
	t.Logf("%+v", rep)
}

// zloneGuessHolds and zloneGuessMisses are the lone ZADDs of the
// planted explorers below: one member moving twice (the first move's
// guesses cover the second's links), and a batch with a ZADD INCR (its
// guess walks toward its increment, not its new score).
var (
	zloneGuessHolds  = []string{"ZADD z 5.5 m5", "ZADD z 9.5 m10", "ZADD z 30.5 m2", "ZADD z 0.5 m2"}
	zloneGuessMisses = []string{"ZADD z 5.5 m5", "ZADD z INCR 3 m12", "ZADD z 0.5 m2"}
)

// TestZAddLoneCrashExplorerPlanted: with moves that trust what was
// logged ahead and log nothing themselves (plantMoveTrustsPrelog), a
// batch of lone ZADDs whose guesses cover their moves (one member moving
// twice: the first move's guesses cover the second's links) leaves no
// violation, which shows warmLone logged them ahead; one with a ZADD
// INCR (its guess walks toward its increment, not its new score) leaves
// crash images the explorer must find: logging ahead is a guess, never
// relied upon.
func TestZAddLoneCrashExplorerPlanted(t *testing.T) {
	explorePlantedGuess(t, &plantMoveTrustsPrelog, zpipeSetup(), zloneGuessHolds, zloneGuessMisses, zpipeState)
}

// TestZAddLoneRehashCrashExplorerPlanted: z's member table is still
// growing after zpipeSetup (checked), so every ZADD of a traced batch
// moves one of its buckets. With bucket moves that trust what was logged
// ahead and log nothing themselves (plantZMoveUnlogged), a batch of lone
// ZADDs, one step each, leaves no violation, which shows warmLone logged
// their steps ahead (appendZRehash); a ZADD of five new members (five
// steps, one guessed: the lookup is of its last member) leaves crash
// images the explorer must find.
func TestZAddLoneRehashCrashExplorerPlanted(t *testing.T) {
	checked := false
	state := func(root *pRoot) (map[string]string, error) {
		if !checked {
			checked = true
			_, e := root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
			if e == nil || e.Coll == nil || e.Coll.ZDict == nil || e.Coll.ZDict.RehashIdx < 0 {
				t.Fatal("z's member table is not growing after the setup: the traced ZADDs take no rehash step")
			}
		}
		return zpipeState(root)
	}
	explorePlantedGuess(t, &plantZMoveUnlogged, zpipeSetup(), zloneGuessHolds,
		[]string{"ZADD z 1.5 n1 2.5 n2 3.5 n3 4.5 n4 5.5 n5"}, state)
}
