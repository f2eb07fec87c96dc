// zwarm.go: skiplist warming, warm.go's last stage for the sorted-set
// writes of a pipeline (ZADD, ZINCRBY, ZREM on a big sorted set). Each
// such command walks the skiplist from the top level down to a member's
// place (ZADD of an existing member twice: its old place and its new one,
// zslMove), and a walk is a chain of dependent cache misses: perf put
// zslMove at about a third of the server's CPU for redis-benchmark's
// ZADD at pipeline 16 (-r 100000: nearly every ZADD moves a member of a
// 100,000-member set). warmZ runs all of a pipeline's walks in lock step,
// one hop of each per pass, so their misses overlap (16 ZADDs: 32 walks in
// flight); the commands' own walks then find the nodes cached.
//
// Before the walks, the members' table paths (bucket slot, chain: the
// nodes themselves, pztable.go) are read the same way, in passes, and
// then the first bytes of each member found (the table's lookup compares
// them: a miss of its own, the member's bytes being their own object).
//
// The walks also guess what each ZADD of an existing member will log
// (zprelog, called by prelog.go before warm.go's last stage): a walk
// keeps its last node on each of the lowest levels (zwalk.path), so the
// two walks of a move end at the predecessors moveAt unlinks and links
// the node after, and those links, joined into runs as moveAt joins them,
// and the node's score and levels are logged ahead with the pipeline's
// other ranges (one engine call and one fence instead of one per move).
// While a set's member table grows, the rehash steps its writes will take
// (one each: zaddAt, zrem) are logged ahead too (appendZRehash).
// The sorted-set refs zprelog takes are then marked done (warmRef.zdone),
// so warmZ walks only what it left.
//
// Invariants: as warm.go: it only reads (between two commands of the
// region, on the executor), through the table's and skiplist's own links, and a wrong
// guess (an INCR's sum, a score that does not parse) costs a walk of loads
// and nothing else; a walk stops at the list's end and after at most
// ZLevel descents.
//
// Crash behaviour: none (no writes).
package redis

import (
	"math"
	"unsafe"
)

// zwarmMax bounds the walks warmed per pipeline or batch of lone
// commands (two per command): as many as warmLone takes (loneMax). At
// pipeline 1 under redis-benchmark -c 50 most ZADDs run in batches of
// all 50 clients (78 % of them, measured: sbench_test.go,
// BenchmarkZAddP1Full); with 32 lookups at most, the last 18 of such a
// batch were neither warmed nor logged ahead, each walking cold and
// making its own engine call and fence.
const zwarmMax = 2 * loneMax

// zpathLevels is how many of its lowest levels a walk keeps its place on
// (zwalk.path): a move logs links on its node's levels only, and with p =
// 1/4 a node has more than 4 levels once in 256.
const zpathLevels = 5

// zwalk is one walk being warmed: toward (s, m), at node n on level i
// (i < 0: done); path[i] is its last node on level i (once it has gone
// below i: the predecessor of (s, m) there), for i < zpathLevels. own is
// the node whose member m is (the walk toward a member's present place;
// else nil): a tie with it is told without reading it. tie counts the
// passes spent on a tie with the next node on level i (tieWait: its
// member's pointer, then its bytes, read a pass apart); mem is the
// member's first byte's address read in the first.
type zwalk struct {
	n    *pZNode
	i    int
	s    float64
	m    []byte
	own  *pZNode
	mem  *byte
	tie  int
	path [zpathLevels]*pZNode
}

// zlookup is one member being looked up in a big sorted set's table
// (pztable.go): at node n of its chain (nil: not there), found once n's
// hash is the member's.
type zlookup struct {
	c     *pColl
	m     []byte
	h     uint64
	n     *pZNode
	found bool
	inNew bool    // n is in T1's chain (the table grows)
	z     float64 // the score a ZADD gives m
	zset  bool    // z is told
	dw    int     // its walk toward its present place in ws (-1: none)
	iw    int     // its walk toward its new place (-1: none)
}

// zwarmTarget is the new score a sorted-set write of args will give its
// member, if it tells one: ZADD's last score (ZINCRBY's is a sum, ZREM's
// none: those warm the member's present place only).
func zwarmTarget(name string, args [][]byte) (float64, bool) {
	if name != "zadd" || len(args) < 4 {
		return 0, false
	}
	return parseScore(args[len(args)-2])
}

// warmZ warms the sorted-set writes among refs (warmRequest's key refs,
// walked by walkRefs) that zprelog left: for each whose key holds a
// skiplist and which names a member (ref.f), the member's table path (its
// node), then the skiplist walks toward the member's place and a ZADD's
// new one. It returns a sum of what it read.
func warmZ(refs []warmRef, buf *zwarmBuf) uint64 {
	_, sink := zwarm(refs, nil, nil, buf, false)
	return sink
}

// zwarmBuf is zwarm's lookups and walks, kept by the server (Server.zbuf,
// executor-owned) rather than on zwarm's stack, which Go would zero
// whole on every call (20 KiB since zwarmMax is 128 walks: +0.75 % of
// ZADD's instructions at pipeline 16, where zwarm runs per pipeline).
type zwarmBuf struct {
	ls [zwarmMax / 2]zlookup
	ws [zwarmMax]zwalk
}

// zprelog is warmZ for prelog.go, which runs first: it warms the same
// walks and adds to pairs what each ZADD of an existing member will log
// if the list does not change before it runs (appendMoveLog), and of a
// new member (appendNewLog), and to hs (nil: none) each move's paths
// (zhint.go: the command checks them instead of walking). The refs
// it takes are marked done (zdone: warmZ and warm.go's field stage skip
// them).
func zprelog(pairs []uint64, refs []warmRef, hs *zhints, buf *zwarmBuf) ([]uint64, uint64) {
	return zwarm(refs, pairs, hs, buf, true)
}

// zwarm is warmZ, and zprelog when guess is set.
func zwarm(refs []warmRef, pairs []uint64, hs *zhints, buf *zwarmBuf, guess bool) ([]uint64, uint64) {
	ls := buf.ls[:0]
	for i := range refs {
		ref := &refs[i]
		if len(ls) == cap(ls) {
			break
		}
		if !ref.zwrite() {
			continue
		}
		ls = append(ls, zlookup{c: ref.e.Coll, m: ref.f, h: hashKey(ref.f), z: ref.z, zset: ref.zset, dw: -1, iw: -1})
		ref.zdone = true
	}
	if len(ls) == 0 {
		return pairs, 0
	}
	walkZTables(ls)
	var sink uint64
	ws := buf.ws[:0]
	for i := range ls {
		if l := &ls[i]; l.found && l.n.MemLen > 0 {
			sink += uint64(*l.n.Mem)
		}
		ws = addZWalks(ws, &ls[i])
	}
	sink += math.Float64bits(walkZ(ws))
	if guess {
		pairs = zguess(pairs, ls, ws, hs)
	}
	clear(ls) // the lookups and walks hold the requests' member bytes
	clear(ws)
	return pairs, sink
}

// zguess is zprelog's part of zwarm, after the walks ws of the lookups
// ls: the rehash steps (appendZRehash), each move's hint (to hs, nil:
// none) and its ranges, or a new member's, added to pairs.
func zguess(pairs []uint64, ls []zlookup, ws []zwalk, hs *zhints) []uint64 {
	pairs = appendZRehash(pairs, ls)
	for i := range ls {
		h, ok := moveHint(&ls[i], ws)
		if ok && hs != nil {
			hs.add(&h)
		}
		if len(pairs) < zprelogMax {
			if ok {
				pairs = appendMoveLog(pairs, &h)
			} else if !ls[i].found {
				pairs = appendNewLog(pairs, &ls[i], ws)
			}
		}
	}
	return pairs
}

// appendZRehash adds to pairs what the rehash steps of the growing
// member tables among ls will log (appendRehashPrelog): a write of a
// member takes one step of its set's table first (zaddAt's move and
// prepareAdd's add, zrem), so a table takes as many steps as ls has
// lookups of it. At pipeline 1 on a growing set (redis-benchmark's ZADD
// -r 100000 until its 100,000 members are in) every ZADD moved a bucket
// with an engine call and a fence of its own.
func appendZRehash(pairs []uint64, ls []zlookup) []uint64 {
	for i := range ls {
		d := ls[i].c.ZDict
		if d.RehashIdx < 0 || firstOf(ls, i) != i {
			continue
		}
		k := 0
		for j := i; j < len(ls); j++ {
			if ls[j].c.ZDict == d {
				k++
			}
		}
		pairs = appendRehashPrelog[pZNode](pairs, d, k)
	}
	return pairs
}

// firstOf is the first lookup of ls on ls[i]'s table.
func firstOf(ls []zlookup, i int) int {
	for j := range ls[:i] {
		if ls[j].c.ZDict == ls[i].c.ZDict {
			return j
		}
	}
	return i
}

// zwrite is whether ref names a member (ref.f) of a big sorted set (its
// key found holding a skiplist and its table) that zwarm has not taken.
func (ref *warmRef) zwrite() bool {
	return ref.f != nil && !ref.zdone && ref.found && ref.e.Coll != nil && ref.e.Coll.ZDict != nil && ref.e.Coll.ZHead != nil
}

// zprelogMax bounds the words zprelog adds to a pipeline's pairs (a move
// logs 3.5 ranges on average: 16 ZADDs take ~110 words).
const zprelogMax = 4 * zwarmMax * 2

// appendMoveLog adds to pairs the ranges the move h (moveHint) will
// log, as zaddAt and moveAt would find them now (the node's score and
// levels and the links of both paths on the node's levels, in moveAt's
// runs: one path's when its place stays, the links holding its score).
func appendMoveLog(pairs []uint64, h *zhint) []uint64 {
	p, n := moveRange(h.x, h.level)
	pairs = append(pairs, uint64(p), uint64(n))
	var d, in [zMaxLevel]*pZNode
	copy(d[:], h.del[:h.level])
	copy(in[:], h.ins[:h.level])
	var runs levelRuns
	runs.add(&d, h.level)
	runs.add(&in, h.level)
	for _, r := range runs.r[:runs.k] {
		p, n := linkRun(r.n, r.lo, r.hi)
		pairs = append(pairs, uint64(p), uint64(n))
	}
	return pairs
}

// appendNewLog adds to pairs what the ZADD of l, a member not found (its
// walk ws[l.iw] done), will log if its node gets one level (three in
// four do) and the table does not start growing first (zslLinkAt): the
// link after its predecessor on level 0, the collection (its length),
// the table's insertion slot (T1's while it grows; the same slot once
// that rehash ends, T1 becoming T0) and count. Another level logs a
// longer run from the same start, which the command then logs itself.
func appendNewLog(pairs []uint64, l *zlookup, ws []zwalk) []uint64 {
	d := l.c.ZDict
	if l.iw < 0 || ws[l.iw].path[0] == nil {
		return pairs
	}
	p, n := linkRun(ws[l.iw].path[0], 0, 1)
	return append(pairs, uint64(p), uint64(n), addrOf(l.c), uint64(unsafe.Sizeof(*l.c)),
		addrOf(d.insertSlot(l.h)), 8, addrOf(&d.Used), 8)
}

// walkZTables follows every lookup's table path in passes, as
// pZDict.find would: the bucket slots (T1's for a bucket already moved),
// then each chain one node per pass until each has found its hash or the
// chain's end; while the table grows, the members not found in T0 are
// then looked for in T1 the same way (one added since it began growing).
func walkZTables(ls []zlookup) {
	for i := range ls {
		l := &ls[i]
		d := l.c.ZDict
		tab := d.T0
		if d.RehashIdx >= 0 && int64(l.h&uint64(len(tab)-1)) < d.RehashIdx {
			tab, l.inNew = d.T1, true // already moved
		}
		l.n = tab[l.h&uint64(len(tab)-1)]
	}
	walkZChains(ls)
	more := false
	for i := range ls {
		l := &ls[i]
		if d := l.c.ZDict; !l.found && !l.inNew && d.RehashIdx >= 0 {
			l.n, l.inNew, more = d.T1[l.h&uint64(len(d.T1)-1)], true, true
		}
	}
	if more {
		walkZChains(ls)
	}
}

// walkZChains follows every lookup's chain from l.n, one node per pass,
// until each has found its hash or the chain's end.
func walkZChains(ls []zlookup) {
	for moved := true; moved; {
		moved = false
		for i := range ls {
			l := &ls[i]
			if l.found || l.n == nil {
				continue
			}
			if l.n.Hash == l.h {
				l.found = true
				continue
			}
			l.n, moved = l.n.Next, true
		}
	}
}

// addZWalks adds the walks of one member looked up (walkZTables) to ws:
// toward the member's present place (its node found) and, for a ZADD,
// toward its new one.
func addZWalks(ws []zwalk, l *zlookup) []zwalk {
	c := l.c
	if c.ZLevel < 1 || len(ws)+2 > cap(ws) {
		return ws
	}
	top := int(c.ZLevel) - 1
	if l.found {
		l.dw = len(ws)
		ws = append(ws, zwalk{n: c.ZHead, i: top, s: l.n.Score, m: l.n.member(), own: l.n})
	}
	if l.zset {
		l.iw = len(ws)
		ws = append(ws, zwalk{n: c.ZHead, i: top, s: l.z, m: l.m})
	}
	return ws
}

// walkZ advances every walk of ws one hop (or one level down) per pass
// until all are done, as zslInsert's walk would go; it returns a sum of
// what it read, so the loads are not dropped.
func walkZ(ws []zwalk) float64 {
	var sink float64
	for moved := true; moved; {
		moved = false
		for k := range ws {
			w := &ws[k]
			if w.i < 0 {
				continue
			}
			moved = true
			l := w.n.lv(w.i)
			f := l.Fwd
			if f == nil { // the end of the list on this level
				w.down()
				continue
			}
			sc := l.FScore // f is read only if the walk steps to it (or a tie)
			adv := sc < w.s
			if sc == w.s && f != w.own { // a tie: the members decide
				if w.tie < tieWait {
					sink += w.readTie(f)
					continue
				}
				adv, w.tie = memberBefore(f, w.m), 0
			}
			// Without a branch on the loaded score: a mispredicted one
			// would hold back the next walks' loads until this one's
			// miss is served, which is what the lock step is for.
			n, down := w.n, 1
			if adv {
				n, down = f, 0
			}
			if w.i < zpathLevels { // a branch on the level, not the score
				w.path[w.i] = n
			}
			w.n, w.i = n, w.i-down
			sink += sc
		}
	}
	return sink
}

// tieWait is the passes a walk spends on a tie before it compares the
// members (readTie): one to load the next node's member pointer, one its
// first bytes.
const tieWait = 2

// readTie is one pass of w's tie with f: it loads f's member pointer (f
// is not read yet: the link held its score), then the member's first
// byte, so that each miss overlaps the other walks' hops as theirs do
// (a compare at once would wait for both, the whole pass behind it: two
// in three of redis-benchmark's ZADDs, its scores drawn from as many
// values as there are members, meet a tie on level 0). It returns what
// it read.
func (w *zwalk) readTie(f *pZNode) float64 {
	w.tie++
	if w.tie == 1 {
		w.mem = f.Mem
		return 0
	}
	if f.MemLen == 0 {
		return 0
	}
	return float64(*w.mem)
}

// down takes w one level down at the list's end, keeping its node as its
// place on the level it leaves (path).
func (w *zwalk) down() {
	if w.i < zpathLevels {
		w.path[w.i] = w.n
	}
	w.i--
}
