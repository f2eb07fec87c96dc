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
// Invariants: as warm.go: it only reads (between two commands of the
// region, on the executor), through the skiplist's own links, and a wrong
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

// zwarmTarget is the new score a sorted-set write of args will give its
// member, if it tells one: ZADD's last score (ZINCRBY's is a sum, ZREM's
// none: those warm the member's present place only).
func zwarmTarget(name string, args [][]byte) (float64, bool) {
	if name != "zadd" || len(args) < 4 {
		return 0, false
	}
	return parseFloat(args[len(args)-2])
}

// warmZ runs the walks of refs (warmRequest's field refs, walked by
// walkRefs) whose collection is a skiplist: toward each found member's
// place and each ZADD's new one. It returns a sum of what it read.
func warmZ(refs []warmRef) uint64 {
	var buf [zwarmMax]zwalk
	ws := buf[:0]
	for i := range refs {
		ws = addZWalks(ws, refs[i].c, &refs[i])
	}
	if len(ws) == 0 {
		return 0
	}
	return math.Float64bits(walkZ(ws))
}

// addZWalks adds the walks of one warmed field ref (its entry found in a
// skiplist set's table, or not) to ws: toward the member's present place
// and, for a ZADD, toward its new one.
func addZWalks(ws []zwalk, c *pColl, ref *warmRef) []zwalk {
	if c == nil || c.ZHead == nil || c.ZLevel < 1 || len(ws)+2 > cap(ws) {
		return ws
	}
	top := int(c.ZLevel) - 1
	if ref.found {
		ws = append(ws, zwalk{n: c.ZHead, i: top, s: bitsScore(ref.e.Expire), m: ref.e.Key})
	}
	if ref.zset {
		ws = append(ws, zwalk{n: c.ZHead, i: top, s: ref.z, m: ref.k})
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
