// zhint.go: a ZADD's move without its own walk. A pipeline's warm-up
// (zwarm.go, zprelog) walks every ZADD's two paths before the commands
// run: toward the member's present place and toward its new one. For a
// move whose node has fewer than zpathLevels levels (255 in 256) those
// walks already hold what the move changes: the node's predecessors on
// its levels (del) and its new place's (ins). The command then does not
// walk again (pzset.go's movePaths was ~12 % of the server's CPU for
// redis-benchmark's ZADD at pipeline 16, on nodes the warm-up had just
// read): it checks that those predecessors still are (moveHinted), since
// the pipeline's earlier commands may have moved them, and relinks the
// node on its levels alone.
//
// A move with a hint does not keep the spans (it knows no ranks): it
// unranks the set first (pzset.go, ranked), and so runs only where the
// set need not keep them (keepsRanks: not ranked, or moved Len times
// since its spans were computed). A rank read computes them again.
//
// Invariants: a hint is trusted only as far as it is checked against the
// list as it is when the move runs: del[i] must link to the node on level
// i (then it is its predecessor there), and ins[i] must sort before the
// new place with its next node on level i, the moving node skipped, not
// (then it is the new place's predecessor there), for every level of the
// node (its level is the walk's, exact: a node's level never changes). A
// node the hint names is live while no node was freed since the walk
// (zFrees; pool frees in a region are not reused before it commits) and
// the region is the walk's: the server's hints are cleared when its
// region ends (Server.runBatch, runAlone), so none outlives its region.
//
// Crash behaviour: a hinted move logs what moveAt logs for the same
// move (logMove: both paths' links on the node's levels and the node's
// score and levels, in one batch) before changing any of it; the spans
// and the rank stamp are not logged (ranked).
package redis

import (
	"sync/atomic"

	engram "github.com/engram-pm/engram-go"
)

// zFrees counts the skiplist nodes freed (freeZNode), so that a hint
// taken before a free is not trusted after it (its nodes could be the
// freed one, unlinked). Process-wide: another server's frees only make
// hints fail their check.
var zFrees atomic.Uint64

// zhint is what the warm-up walks found for the move of node x of set
// c to score s: x's level and, on each of its levels, its predecessor
// (del) and the new place's in the list without x (ins).
type zhint struct {
	c        *pColl
	x        *pZNode
	s        float64
	level    int
	frees    uint64
	del, ins [zpathLevels]*pZNode
}

// zhints is the server's hints of the region's pipeline being run (or,
// at pipeline 1, of its batch's lone commands): at most one per warmed
// lookup.
type zhints struct {
	h    [zwarmMax / 2]zhint
	n    int
	next int // where take looks first: after the hint it took last
}

// reset drops every hint (a new warm-up, or the region's end).
func (hs *zhints) reset() { hs.n, hs.next = 0, 0 }

// add keeps h.
func (hs *zhints) add(h *zhint) {
	if hs.n < len(hs.h) {
		hs.h[hs.n] = *h
		hs.n++
	}
}

// take is the hint for moving x of c to s, or nil (x nil: a new
// member).
// The hints are in the order of the commands (the warm-up's lookups
// follow the requests), so the search starts after the last one taken:
// a batch of 50 lone ZADDs takes each at its first probe, not after a
// scan of the ones before it.
func (hs *zhints) take(c *pColl, x *pZNode, s float64) *zhint {
	if x == nil {
		return nil
	}
	for k := range hs.n {
		i := hs.next + k
		if i >= hs.n {
			i -= hs.n
		}
		if h := &hs.h[i]; h.x == x && h.c == c && h.s == s {
			hs.next = i + 1
			return h
		}
	}
	return nil
}

// moveHint makes the hint of lookup l's move from its walks ws[l.dw]
// and ws[l.iw] (both done): false if there is none to make (no move, a
// walk missing, the node not where its walk ended, or maybe taller than
// the walks keep: zpathLevels).
func moveHint(l *zlookup, ws []zwalk) (zhint, bool) {
	if !l.found || l.dw < 0 || l.iw < 0 || l.n.Score == l.z {
		return zhint{}, false
	}
	h := zhint{c: l.c, x: l.n, s: l.z, frees: zFrees.Load()}
	del, ins := &ws[l.dw].path, &ws[l.iw].path
	for i, p := range del {
		if p != nil && p.lv(i).Fwd == h.x {
			h.level = i + 1
		}
	}
	if h.level == 0 || h.level == zpathLevels {
		return zhint{}, false // not the node the walk went to (a hash's collision), or maybe taller
	}
	for i := range h.level {
		h.del[i], h.ins[i] = del[i], ins[i]
		if h.ins[i] == h.x { // the move's walk skips x: it stays at x's predecessor
			h.ins[i] = del[i]
		}
	}
	return h, true
}

// moveHinted moves x to s along h's paths if they hold (see the file's
// invariants) and x's levels are below the list's top (the list's level
// stays): it logs the move (logMove), unranks c, unlinks x on its levels
// and links it at its new place. False (nothing done) if h does not hold.
func (c *pColl) moveHinted(tx *engram.Tx, x *pZNode, s float64, h *zhint) (bool, error) {
	level := h.level
	if level >= int(c.ZLevel) || h.frees != zFrees.Load() {
		return false, nil
	}
	var del, ins [zMaxLevel]*pZNode
	m := x.member()
	for i := range level {
		d, p := h.del[i], h.ins[i]
		if d.lv(i).Fwd != x || !(plantHintUnchecked || c.holdsPlace(p, i, x, s, m)) {
			return false, nil
		}
		del[i], ins[i] = d, p
	}
	if err := c.logMove(tx, x, level, &del, &ins, false); err != nil {
		return false, err
	}
	c.ZHead.Hash = tx.Epoch() + 1 //engramvet:ignore the rank stamp is not logged (ranked): not the epoch, so the set is not ranked
	for i := range level {
		u, xl := del[i].lv(i), x.lv(i)
		u.Fwd, u.FScore = xl.Fwd, xl.FScore //engramvet:ignore logged above (logMove: del's links on x's levels)
	}
	x.Score = s //engramvet:ignore logged above (logMove: x's score and levels)
	for i := range level {
		u, xl := ins[i].lv(i), x.lv(i)
		xl.Fwd, xl.FScore = u.Fwd, u.FScore //engramvet:ignore logged above (logMove: x's levels)
		u.Fwd, u.FScore = x, s              //engramvet:ignore logged above (logMove: ins's links on x's levels)
	}
	return true, nil
}

// holdsPlace is whether p is the predecessor of (s, m) on level i of the
// list without x: p (not x) sorts before (s, m) and the walk stops after
// it there. p is a live node on level i (moveHinted's caller checked it
// was freed by nobody).
func (c *pColl) holdsPlace(p *pZNode, i int, x *pZNode, s float64, m []byte) bool {
	if p == x || (p != c.ZHead && (p.Score > s || (p.Score == s && !memberBefore(p, m)))) {
		return false
	}
	l := p.lv(i)
	if l.Fwd == x {
		l = x.lv(i)
	}
	return stop(l, s, m)
}

// plantHintUnchecked is for the planted-fault test only: a hinted move
// trusts its new place's predecessors (ins) unchecked, as if nothing
// could have moved them since the warm-up.
var plantHintUnchecked bool
