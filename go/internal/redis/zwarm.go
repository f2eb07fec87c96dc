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
// Invariants: as warm.go: it only reads (between two commands of the
// region, on the executor), through the table's and skiplist's own links, and a wrong
// guess (an INCR's sum, a score that does not parse) costs a walk of loads
// and nothing else; a walk stops at the list's end and after at most
// ZLevel descents.
//
// Crash behaviour: none (no writes).
package redis

import "math"

// zwarmMax bounds the walks warmed per pipeline (two per command).
const zwarmMax = 64

// zwalk is one walk being warmed: toward (s, m), at node n on level i
// (i < 0: done).
type zwalk struct {
	n *pZNode
	i int
	s float64
	m []byte
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
	z     float64 // the score a ZADD gives m
	zset  bool    // z is told
}

// zwarmTarget is the new score a sorted-set write of args will give its
// member, if it tells one: ZADD's last score (ZINCRBY's is a sum, ZREM's
// none: those warm the member's present place only).
func zwarmTarget(name string, args [][]byte) (float64, bool) {
	if name != "zadd" || len(args) < 4 {
		return 0, false
	}
	return parseFloat(args[len(args)-2])
}

// warmZ warms the sorted-set writes among refs (warmRequest's key refs,
// walked by walkRefs): for each whose key holds a skiplist and which
// names a member (ref.f), the member's table path (its node), then the
// skiplist walks toward the member's place and a ZADD's new one. It
// returns a sum of what it read.
func warmZ(refs []warmRef) uint64 {
	var lbuf [zwarmMax / 2]zlookup
	ls := lbuf[:0]
	for i := range refs {
		ref := &refs[i]
		if len(ls) == cap(ls) {
			break
		}
		if ref.f == nil || !ref.found || ref.e.Coll == nil || ref.e.Coll.ZDict == nil || ref.e.Coll.ZHead == nil {
			continue
		}
		ls = append(ls, zlookup{c: ref.e.Coll, m: ref.f, h: hashKey(ref.f), z: ref.z, zset: ref.zset})
	}
	if len(ls) == 0 {
		return 0
	}
	walkZTables(ls)
	var sink uint64
	var buf [zwarmMax]zwalk
	ws := buf[:0]
	for i := range ls {
		if l := &ls[i]; l.found && l.n.MemLen > 0 {
			sink += uint64(*l.n.Mem)
		}
		ws = addZWalks(ws, &ls[i])
	}
	return sink + math.Float64bits(walkZ(ws))
}

// walkZTables follows every lookup's table path in passes, as
// pZDict.find would: the bucket slots (T1's for a bucket already moved),
// then each chain one node per pass until each has found its hash or the
// chain's end. A member added while the table grows, in T1 though its
// T0 bucket is not moved yet, is not looked for in T1: the command's own
// lookup takes that miss.
func walkZTables(ls []zlookup) {
	for i := range ls {
		l := &ls[i]
		d := l.c.ZDict
		tab := d.T0
		if d.RehashIdx >= 0 && int64(l.h&uint64(len(tab)-1)) < d.RehashIdx {
			tab = d.T1 // already moved
		}
		l.n = tab[l.h&uint64(len(tab)-1)]
	}
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
		ws = append(ws, zwalk{n: c.ZHead, i: top, s: l.n.Score, m: l.n.member()})
	}
	if l.zset {
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
			f := w.n.lv(w.i).Fwd
			if f == nil { // the end of the list on this level
				w.i--
				continue
			}
			sc := f.Score
			adv := sc < w.s
			if sc == w.s { // a tie (rare): the members decide
				adv = memberBefore(f, w.m)
			}
			// Without a branch on the loaded score: a mispredicted one
			// would hold back the next walks' loads until this one's
			// miss is served, which is what the lock step is for.
			n, down := w.n, 1
			if adv {
				n, down = f, 0
			}
			w.n, w.i = n, w.i-down
			sink += sc
		}
	}
	return sink
}
