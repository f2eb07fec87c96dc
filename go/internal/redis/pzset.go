// pzset.go: the persistent sorted set: a skiplist ordered by (score,
// member) whose levels carry spans (so ranks are O(log n)), plus a table
// member -> node (pZDict, pztable.go: its chains run through the nodes).
// A node is sized by its level (2+L 24-byte elements, as Redis's node:
// pZNode) and holds the member, its score, its table link and its levels,
// each level with its next node's score: one allocation (and the member's
// bytes) per member, pool layout version 8 (server.go). An insert or
// delete logs the links it changes (on the node's own levels: one or two
// for most nodes) and its table link in one batch (zslLinkAt, unlinkAt);
// a member whose score changes keeps its node, moved (zslMove: one walk,
// two interleaved pointer chases, unlink and link logged in one batch;
// its new place may be its old one).
//
// The spans are not logged: they follow from the links, so they are kept
// up to date in place but trusted only while the set is ranked (its stamp
// is the pool's epoch, engram.Tx.Epoch: set when they are computed, and
// no longer equal after a rollback or a reopen). A rank read of a set
// that is not ranked computes them again first (rerank: one pass over
// level 0). So a move that keeps its node's levels logs what it relinks
// (its level-0 neighbours for a level-1 node), not the ~10 spans of the
// levels above it on both paths, and of each level it relinks only the
// link and the score beside it (zlog.go: a level's span is its last
// word).
//
// Also zobj, the view the sorted-set commands work through: the compact
// encoding decoded into a zsetv while small (written back whole, converted
// to a skiplist past Redis's thresholds), or the skiplist itself.
//
// Invariants: ZHead has zMaxLevel levels and is in no table; a node
// allocated with level L is linked on exactly its levels 0..L-1 (a move
// keeps its node and its level); a linked level's FScore is its Fwd's
// Score; while the set is ranked (ranked),
// lv(i).Span of a node is the number of level-0 steps to lv(i).Fwd (to
// the end for a nil Fwd, as Redis's zskiplist); Len is the number of
// nodes; the table holds exactly the nodes (ZDict.Used == Len), each in
// the bucket of its member's hash.
//
// Crash behaviour: every change but a span's is logged in the executor's
// region first; a crash or a rollback may leave spans half changed, and
// leaves the set not ranked (a new open or a rollback changes the epoch).
package redis

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

const zMaxLevel = 32

// pZNode is a skiplist node, sized by its level as Redis's zskiplistNode
// is, and the member table's chain link. In the pool a node of level L is
// an array of 2+L pZLevel elements (engram.Make[pZLevel]), read through
// this struct:
//
//	element 0:     Next, Hash: the member table's chain (pztable.go); Spare (0;
//	               the header's: its moves while ranked, keepsRanks)
//	element 1:     Mem, MemLen: the member's bytes (the node's own); Score
//	elements 2..:  L[0..L-1], the node's levels
//
// A level holds its next node's score (FScore) beside the link, so a walk
// compares at each level without loading the next node: it reads a node
// only when it steps to it (a hop that stops reads nothing new: about a
// quarter of a walk's misses, p = 1/4), and a tie reads the next node's
// member. A level-1 node is 72 bytes (a 96-byte slot with the object
// header), level 2 is 96 (112), level 3 is 120 (160): ~103 bytes of slot
// on average (p = 1/4; version 6's 16-byte levels took ~85), for both the
// skiplist and the table. Every pointer is at an element's pointer word,
// so the pool's collector, swizzling and checked mode see the node as the
// array it is. A lookup reads Next, Hash, Mem and MemLen (the node's first
// 40 bytes) and the score beside them.
//
// The header's Hash word (it is in no table) is the set's rank stamp
// (ranked). There are no back links (nothing walks the list backwards: a
// reverse range is found by rank and read forwards).
//
// The Go struct declares zMaxLevel levels so that code can index them;
// only the node's first L exist (the header has all of them: it is this
// struct's size). Never copy, Log or BatchLog a *pZNode as a whole value
// (that would read past a short node): log its elements (elems, L[i:j]).
type pZNode struct {
	Next   *pZNode
	Hash   uint64
	Spare  uint64 // 0 (the header's: keepsRanks)
	Mem    *byte
	MemLen int64
	Score  float64
	L      [zMaxLevel]pZLevel
}

// pZLevel is one level of a node: the link, the linked node's score (0
// at the end: Fwd nil) and the link's span. Invariant: FScore ==
// Fwd.Score for every linked level (a link and its score are written and
// logged together: pZLink). The span is last so that what a change logs
// (the link and its score, not the span: ranked) is the element's first
// 16 bytes, and a walk's two reads (Fwd, FScore) are adjacent.
type pZLevel struct {
	Fwd    *pZNode
	FScore float64
	Span   int64
}

// pZLink is the part of a level a link change logs: the link and the
// score beside it (its span is not logged: ranked).
type pZLink struct {
	Fwd    *pZNode
	FScore float64
}

// zNodeHead is the number of elements before a node's levels; zNodeScore
// is the element of Mem, MemLen and Score.
const (
	zNodeHead  = 2
	zNodeScore = 1
)

// The element layout above, checked at compile time (an index out of
// range fails the build).
var (
	_ = [1]int{}[unsafe.Offsetof(pZNode{}.Hash)-unsafe.Offsetof(pZLevel{}.FScore)]
	_ = [1]int{}[unsafe.Offsetof(pZNode{}.Spare)-unsafe.Offsetof(pZLevel{}.Span)]
	_ = [1]int{}[unsafe.Offsetof(pZNode{}.Mem)-zNodeScore*unsafe.Sizeof(pZLevel{})]
	_ = [1]int{}[unsafe.Offsetof(pZNode{}.Score)-zNodeScore*unsafe.Sizeof(pZLevel{})-unsafe.Offsetof(pZLevel{}.Span)]
	_ = [1]int{}[unsafe.Sizeof(pZLink{})-unsafe.Offsetof(pZLevel{}.Span)]
	_ = [1]int{}[unsafe.Offsetof(pZNode{}.L)-zNodeHead*unsafe.Sizeof(pZLevel{})]
	_ = [1]int{}[unsafe.Sizeof(pZNode{})-(zNodeHead+zMaxLevel)*unsafe.Sizeof(pZLevel{})]
)

// lv is level i of n (i below n's level). Its address is computed, not
// indexed: &n.L[i] would touch n's first word (Go's nil check) on a line
// the level is never on for a level-1 node (a slot's object header puts
// the node at 16 or 48 bytes into a line, its level 0 48 bytes on), so
// every hop of a walk would miss twice.
func (n *pZNode) lv(i int) *pZLevel {
	// SAFETY: i is below n's level (the caller's invariant), so the
	// element is inside n's pool array (zNodeHead+level elements).
	return (*pZLevel)(unsafe.Add(unsafe.Pointer(n), uintptr(zNodeHead+i)*unsafe.Sizeof(pZLevel{})))
}

// member is n's member (the node's own bytes).
func (n *pZNode) member() []byte { return unsafe.Slice(n.Mem, n.MemLen) }

// elems is the pool array of a node of the given level: all of it.
func (n *pZNode) elems(level int) []pZLevel {
	return unsafe.Slice((*pZLevel)(unsafe.Pointer(n)), zNodeHead+level)
}

// isMember is whether n's member is the bytes of m itself (not merely
// equal ones): a walk toward a node's own place with its own member
// (x.member()) tells the node without reading the bytes.
func (n *pZNode) isMember(m []byte) bool {
	return n.Mem == unsafe.SliceData(m) && n.MemLen == int64(len(m))
}

// stop is whether a walk toward (s, m) stops before l's next node (nil:
// the end), told from the score beside the link (FScore): the next node
// is read only for a tie. Written out for the walks to inline; equal
// scores are rare and compare members apart.
func stop(l *pZLevel, s float64, m []byte) bool {
	return l.Fwd == nil || l.FScore > s || (l.FScore == s && !memberBefore(l.Fwd, m))
}

// memberBefore is whether n's member sorts before m. A walk toward a
// member's present place meets its own node (same score): told by
// pointer (isMember), without reading the bytes.
//
//go:noinline
func memberBefore(n *pZNode, m []byte) bool {
	return !n.isMember(m) && bytes.Compare(n.member(), m) < 0
}

// newZNode allocates a node of the given level for (s, m) with a copy of
// m's bytes (fresh: no log); m nil (the header) allocates no bytes.
func newZNode(tx *engram.Tx, level int, s float64, m []byte) (*pZNode, error) {
	els, err := engram.Make[pZLevel](tx, zNodeHead+level, zNodeHead+level)
	if err != nil {
		return nil, err
	}
	n := (*pZNode)(unsafe.Pointer(unsafe.SliceData(els)))
	n.Score, n.Hash = s, hashKey(m)
	if m != nil {
		pm, err := engram.Bytes(tx, m)
		if err != nil {
			return nil, err
		}
		n.Mem, n.MemLen = unsafe.SliceData(pm), int64(len(pm))
	}
	return n, nil
}

// freeZNode frees a node and its member's bytes (counted in zFrees).
func freeZNode(tx *engram.Tx, n *pZNode) error {
	zFrees.Add(1)
	if n.MemLen > 0 {
		if err := tx.Free(unsafe.Slice(n.Mem, n.MemLen)); err != nil {
			return err
		}
	}
	return tx.Free(n)
}

func newZColl(tx *engram.Tx) (*pColl, error) {
	c, err := engram.New[pColl](tx)
	if err != nil {
		return nil, err
	}
	if c.ZDict, err = newZDict(tx); err != nil {
		return nil, err
	}
	if c.ZHead, err = newZNode(tx, zMaxLevel, 0, nil); err != nil {
		return nil, err
	}
	c.ZLevel = 1
	c.ZHead.Hash = tx.Epoch() // no spans yet: ranked (ranked)
	c.ZHead.Spare = zUnkept   // but keeps none before a rank read wants them (keepsRanks)
	return c, nil
}

// ranked is whether c's spans are exact: its stamp (the header's Hash
// word) is the pool's epoch. It is set when they are computed (a new set,
// rerank) and stays while every region that changes the set commits: each
// keeps them up to date, unlogged (a rollback would not restore them, so
// it changes the epoch).
func (c *pColl) ranked(tx *engram.Tx) bool { return c.ZHead.Hash == tx.Epoch() }

// ranks makes c ranked: if it is not, it computes every span again from
// the links (rerank).
func (c *pColl) ranks(tx *engram.Tx) {
	if !c.ranked(tx) {
		c.rerank(tx)
	}
}

// rerank sets every span of c from the links, in one pass over level 0
// (last[i]: the last node seen so far on level i, at rank at[i]; a node
// is on level i when last[i] links to it there, and its levels are
// contiguous), then stamps c ranked. The stores are not logged (ranked):
// inside a region that rolls back, the new stamp no longer holds.
func (c *pColl) rerank(tx *engram.Tx) {
	var last [zMaxLevel]*pZNode
	var at [zMaxLevel]int64
	top := int(c.ZLevel)
	for i := range top {
		last[i] = c.ZHead
	}
	var r int64
	for x := c.ZHead.lv(0).Fwd; x != nil; x = x.lv(0).Fwd {
		r++
		for i := 0; i < top && last[i].lv(i).Fwd == x; i++ {
			last[i].lv(i).Span = r - at[i] //engramvet:ignore a span is not logged (ranked)
			last[i], at[i] = x, r
		}
	}
	for i := range top {
		last[i].lv(i).Span = c.Len - at[i] //engramvet:ignore to the end; a span is not logged (ranked)
	}
	c.ZHead.Hash = tx.Epoch() //engramvet:ignore the stamp is not logged (ranked)
	c.ZHead.Spare = 0         //engramvet:ignore a count for keepsRanks, not logged (a heuristic)
}

// keepsRanks is whether a move keeps c's spans (and so walks its whole
// paths, with ranks): while c is ranked, through its first Len moves
// since a rank read computed the spans (rerank; the header's Spare counts
// them, unlogged: a crash or a rollback leaves a count as good as any; a
// new set starts past any length, zUnkept: no rank read has wanted them
// yet). After those, a move that can skip its walk (moveHinted) lets the
// spans go (unranks c), and the next rank read computes them again: O(n)
// at most once per n moves, so a rank read stays O(log n) amortized
// while a set only written is moved without its paths' ranks.
func (c *pColl) keepsRanks(tx *engram.Tx) bool {
	return c.ranked(tx) && c.ZHead.Spare < uint64(c.Len)
}

// zUnkept is a move count past any set's length (keepsRanks).
const zUnkept = 1 << 62

// freeZColl frees a sorted set's nodes, table and collection.
func freeZColl(tx *engram.Tx, c *pColl) error {
	for n := c.ZHead; n != nil; {
		next := n.lv(0).Fwd
		if err := freeZNode(tx, n); err != nil {
			return err
		}
		n = next
	}
	if c.ZDict != nil {
		if err := c.ZDict.free(tx); err != nil {
			return err
		}
	}
	return tx.Free(c)
}

func scoreBits(s float64) int64 { return int64(math.Float64bits(s)) }
func bitsScore(b int64) float64 { return math.Float64frombits(uint64(b)) }

// zrandomLevel is a new node's level: 1, then one more with chance 1/4
// each, up to zMaxLevel (Redis's ZSKIPLIST_P).
func zrandomLevel() int {
	l := 1
	for l < zMaxLevel && zlevelDraw(4) == 0 {
		l++
	}
	return l
}

// zlevelSource, when set, draws the levels instead of the global source:
// the crash explorers' planted tests fix it so that which nodes are tall
// (and so which moves are logged ahead) is the same in every run. Tests
// only; nil in the server.
var zlevelSource *rand.Rand

func zlevelDraw(n int) int {
	if zlevelSource != nil {
		return zlevelSource.IntN(n)
	}
	return rand.IntN(n)
}

// zfind is member m's node, or nil.
func (c *pColl) zfind(m []byte) *pZNode {
	_, n := c.ZDict.find(m, hashKey(m))
	return n
}

// zscore is member m's score.
func (c *pColl) zscore(m []byte) (float64, bool) {
	n := c.zfind(m)
	if n == nil {
		return 0, false
	}
	return n.Score, true
}

// zadd sets m's score; true if m is new.
func (c *pColl) zadd(tx *engram.Tx, m []byte, s float64) (bool, error) {
	return c.zaddAt(tx, c.zfind(m), m, s, nil)
}

// zaddAt sets m's score, x being m's node (nil: m is new): a new member
// gets a node, linked into the skiplist and the table; another is moved,
// its node kept, unlinked from its old place and linked at its new one
// (no free and new allocation; its place may be the old one). A changed
// score always takes the move's walk, as Redis's zslUpdateScore does:
// the predecessors' links hold the node's score (pZLevel.FScore), unless
// h (nil: none), what the pipeline's warm-up walks found for this move,
// still holds (moveHinted).
func (c *pColl) zaddAt(tx *engram.Tx, x *pZNode, m []byte, s float64, h *zhint) (bool, error) {
	if x != nil {
		if x.Score == s {
			return false, nil
		}
		// A growing table moves a bucket per move too (Redis's lookups
		// do): with only adds and removals moving them, a set whose
		// writes are moves keeps two tables for good (every lookup
		// probes both, and a new member's log is not guessed ahead:
		// zwarm.go, appendNewLog).
		if err := c.ZDict.rehashStep(tx); err != nil {
			return false, err
		}
		return false, c.zslMove(tx, x, s, h)
	}
	if err := c.ZDict.prepareAdd(tx); err != nil {
		return false, err
	}
	return true, c.zslInsert(tx, s, m)
}

// zrem removes m; false if absent.
func (c *pColl) zrem(tx *engram.Tx, m []byte) (bool, error) {
	if err := c.ZDict.rehashStep(tx); err != nil {
		return false, err
	}
	slot, x := c.ZDict.find(m, hashKey(m))
	if x == nil {
		return false, nil
	}
	return true, c.zslDelete(tx, x, slot)
}

// zslInsert links a new node for member m at score s (the table prepared:
// prepareAdd).
func (c *pColl) zslInsert(tx *engram.Tx, s float64, m []byte) error {
	var update [zMaxLevel]*pZNode
	var rank [zMaxLevel]int64
	n := c.ZHead
	for i := int(c.ZLevel) - 1; i >= 0; i-- {
		if i < int(c.ZLevel)-1 {
			rank[i] = rank[i+1]
		}
		for l := n.lv(i); !stop(l, s, m); l = n.lv(i) {
			rank[i] += l.Span
			n = l.Fwd
		}
		update[i] = n
	}
	return c.zslLinkAt(tx, s, m, zrandomLevel(), &update, &rank)
}

// zslMove moves node x from its score to s: with the paths h found
// (moveHinted) if they still hold and the set need not keep its spans
// (keepsRanks), else with one walk that finds both places: the node's
// predecessors (del) and, in the list without the node, the new place's
// (ins, with ranks), the two pointer chases interleaved so that their
// cache misses overlap. Then the node is unlinked (the list becomes the
// one ins was found in) and linked again.
func (c *pColl) zslMove(tx *engram.Tx, x *pZNode, s float64, h *zhint) error {
	if h != nil && !c.keepsRanks(tx) {
		if moved, err := c.moveHinted(tx, x, s, h); moved || err != nil {
			return err
		}
	}
	if c.ranked(tx) {
		c.ZHead.Spare++ //engramvet:ignore a count for keepsRanks, not logged (a heuristic)
	}
	var del, ins [zMaxLevel]*pZNode
	var rank [zMaxLevel]int64
	c.movePaths(x, s, &del, &ins, &rank)
	return c.moveAt(tx, x, s, &del, &ins, &rank)
}

// movePaths is zslMove's walk: x's predecessors (del) and, in the list
// without x, those of s's place (ins, with their ranks).
func (c *pColl) movePaths(x *pZNode, s float64, del, ins *[zMaxLevel]*pZNode, rank *[zMaxLevel]int64) {
	s0, m := x.Score, x.member()
	nd, ni := c.ZHead, c.ZHead
	for i := int(c.ZLevel) - 1; i >= 0; i-- {
		if i < int(c.ZLevel)-1 {
			rank[i] = rank[i+1]
		}
		dDone, iDone := false, false
		for !dDone || !iDone {
			if !dDone {
				if l := nd.lv(i); stop(l, s0, m) {
					dDone = true
				} else {
					nd = l.Fwd
				}
			}
			if !iDone {
				l := ni.lv(i)
				span := l.Span
				if l.Fwd == x { // skip the moving node
					span += x.lv(i).Span - 1
					l = x.lv(i)
				}
				if stop(l, s, m) {
					iDone = true
				} else {
					rank[i] += span
					ni = l.Fwd
				}
			}
		}
		del[i], ins[i] = nd, ni
	}
}

// moveAt unlinks node x (predecessors del) and links it at s (ins,
// rank: found in the list without it), both changes logged in one batch:
// both paths' links on the node's levels (each with the score beside it)
// and the node's score and levels (one range). The node's level is the
// highest level del links to it on; the levels it alone occupied are the
// header on ins, so ins covers every level the link changes. The spans
// of the levels above the node's change by one (or not at all, where
// both paths share the node), unlogged (ranked).
//
// A new place right after the old predecessor is the old place (ins is
// del on the node's levels): the same unlink and link write the score
// into the node and beside its predecessors' links.
// The collection's header is neither written nor logged unless the
// list's level changes (its length would).
func (c *pColl) moveAt(tx *engram.Tx, x *pZNode, s float64, del, ins *[zMaxLevel]*pZNode, rank *[zMaxLevel]int64) error {
	if del[0].lv(0).Fwd != x {
		return errCorruptZSet
	}
	top := int(c.ZLevel)
	level := levelOn(del, x, top)
	header := level == top && c.ZHead.lv(top-1).Fwd == x && x.lv(top-1).Fwd == nil
	if err := c.logMove(tx, x, level, del, ins, header); err != nil {
		return err
	}
	c.unlinkLogged(del, x) //engramvet:ignore the batch above: levelRuns of del and ins on x's levels, x's score and levels, c if header; spans unlogged (ranked)
	if header {
		c.Len-- //engramvet:ignore c is in the batch when header
	}
	c.linkLogged(s, x, level, ins, rank) //engramvet:ignore the batch above (see unlinkLogged); ins is the caller's local array
	if header {
		c.Len++ //engramvet:ignore c is in the batch when header
	}
	return nil
}

// logMove logs, in one batch, what a move of x (of the given level)
// from after del to after ins changes: both paths' links on x's levels,
// in levelRuns, x's score and levels (one range), and c when header (the
// list's level may change).
func (c *pColl) logMove(tx *engram.Tx, x *pZNode, level int, del, ins *[zMaxLevel]*pZNode, header bool) error {
	var b engram.LogBatch
	if !plantKeptPlaceLogsNode || ins[0] != del[0] {
		var runs levelRuns
		runs.add(del, level)
		runs.add(ins, level)
		runs.log(tx, &b)
	}
	batchLogMove(tx, &b, x, level)
	if header {
		engram.BatchLog(tx, &b, c)
	}
	if plantMoveTrustsPrelog {
		return nil
	}
	return tx.LogBatch(&b)
}

// plantMoveTrustsPrelog is for the crash explorer's planted-fault test
// only: a move (moveAt) logs nothing itself, as if what prelog logged
// ahead were sure to cover it.
var plantMoveTrustsPrelog bool

// plantKeptPlaceLogsNode is for the crash explorer's planted-fault test
// only: a move whose place stays (ins is del) logs its node's score and
// levels but not its predecessors' links, whose scores (FScore) it
// changes.
var plantKeptPlaceLogsNode bool

// levelOn is the level of x, update[i] being its predecessor on each of
// the list's top levels: the highest level whose predecessor links to x.
func levelOn(update *[zMaxLevel]*pZNode, x *pZNode, top int) int {
	level := 0
	for i := 0; i < top; i++ {
		if update[i].lv(i).Fwd == x {
			level = i + 1
		}
	}
	return level
}

// zslLinkAt links a new node of the given level for member m at s after
// update[i] on each level, rank[i] being update[i]'s rank, and into the
// table (prepareAdd done):
//  1. log, in one batch (one engine call, one fence), what the skiplist
//     link changes (addChange: the links on the node's levels; the
//     header) and what the table link changes (the insertion slot, Used);
//  2. allocate the node and its member's bytes (fresh: no log);
//  3. link it into the table and the skiplist.
//
// A crash before the region commits undoes both links; the node is then
// unreachable, garbage for the pool's collector.
func (c *pColl) zslLinkAt(tx *engram.Tx, s float64, m []byte, level int, update *[zMaxLevel]*pZNode, rank *[zMaxLevel]int64) error {
	for i := int(c.ZLevel); i < level; i++ {
		update[i] = c.ZHead //engramvet:ignore update is the caller's local array (zslInsert), not pool memory
	}
	slot := c.ZDict.insertSlot(hashKey(m))
	var b engram.LogBatch
	c.addChange(tx, &b, update, level)
	engram.BatchLog(tx, &b, c)
	c.ZDict.logLink(tx, &b, slot)
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	x, err := newZNode(tx, level, s, m)
	if err != nil {
		return err
	}
	c.ZDict.linkLogged(slot, x)
	c.linkLogged(s, x, level, update, rank) //engramvet:ignore the batch above: addChange's level runs, c; update is the caller's local array; spans unlogged (ranked)
	c.Len++
	return nil
}

// linkLogged is zslLinkAt's change, its ranges logged: x (allocated) is
// linked at s. The caller counts x in Len.
func (c *pColl) linkLogged(s float64, x *pZNode, level int, update *[zMaxLevel]*pZNode, rank *[zMaxLevel]int64) {
	if level > int(c.ZLevel) {
		for i := int(c.ZLevel); i < level; i++ {
			update[i] = c.ZHead
			c.ZHead.lv(i).Span = c.Len
		}
		c.ZLevel = int64(level)
	}
	x.Score = s
	c.link(update, rank, x, level)
}

// link puts x (its score set) after update[i] on its level levels (each
// link with the score beside it: what is logged, zlog.go); the spans, on
// those levels and the ones above (grown by one), change unlogged
// (ranked).
func (c *pColl) link(update *[zMaxLevel]*pZNode, rank *[zMaxLevel]int64, x *pZNode, level int) {
	for i := 0; i < level; i++ {
		u, xl := update[i].lv(i), x.lv(i)
		xl.Fwd, xl.FScore = u.Fwd, u.FScore
		u.Fwd, u.FScore = x, x.Score
		x.lv(i).Span = u.Span - (rank[0] - rank[i])
		u.Span = rank[0] - rank[i] + 1
	}
	for i := level; i < int(c.ZLevel); i++ {
		update[i].lv(i).Span++ //engramvet:ignore a span is not logged (ranked)
	}
}

// addChange adds to b what an insert or delete at update changes:
// update[i].lv(i) for every level below top, the node's level (a run of
// levels one node holds as one range: the search path visits a node on
// consecutive levels; a node's levels are contiguous). The spans above
// it change unlogged (ranked).
func (c *pColl) addChange(tx *engram.Tx, b *engram.LogBatch, update *[zMaxLevel]*pZNode, top int) {
	for i := 0; i < top; {
		n, j := update[i], i+1
		for j < top && update[j] == n {
			j++
		}
		batchLogLinks(tx, b, n, i, j)
		i = j
	}
}

// levelRuns is the set of level runs (node n's levels lo..hi-1) a move
// changes, a node's runs on both paths joined into one range where they
// touch: the two paths share their upper nodes (the header's top
// levels at least), which two addChange calls would log twice.
type levelRuns struct {
	r [2 * zMaxLevel]levelRun
	k int
}

type levelRun struct {
	n      *pZNode
	lo, hi int
}

// add adds update[i].L[i] for every level below top.
func (rs *levelRuns) add(update *[zMaxLevel]*pZNode, top int) {
	for i := 0; i < top; {
		n, j := update[i], i+1
		for j < top && update[j] == n {
			j++
		}
		rs.put(n, i, j)
		i = j
	}
}

// put adds n's levels lo..hi-1, joined to a run of n they overlap or
// touch.
func (rs *levelRuns) put(n *pZNode, lo, hi int) {
	for q := range rs.r[:rs.k] {
		if r := &rs.r[q]; r.n == n && lo <= r.hi && r.lo <= hi {
			r.lo, r.hi = min(r.lo, lo), max(r.hi, hi)
			return
		}
	}
	rs.r[rs.k] = levelRun{n, lo, hi}
	rs.k++
}

// log adds every run to b.
func (rs *levelRuns) log(tx *engram.Tx, b *engram.LogBatch) {
	for _, r := range rs.r[:rs.k] {
		batchLogLinks(tx, b, r.n, r.lo, r.hi)
	}
}

// zslDelete unlinks node x from the skiplist and from the table (slot:
// the table's slot that points at it) and frees it.
func (c *pColl) zslDelete(tx *engram.Tx, x *pZNode, slot **pZNode) error {
	var update [zMaxLevel]*pZNode
	s, m := x.Score, x.member()
	n := c.ZHead
	for i := int(c.ZLevel) - 1; i >= 0; i-- {
		for l := n.lv(i); !stop(l, s, m); l = n.lv(i) {
			n = l.Fwd
		}
		update[i] = n
	}
	if err := c.unlinkAt(tx, &update, x, slot); err != nil {
		return err
	}
	return freeZNode(tx, x)
}

// unlinkAt unlinks node x, update[i] being its predecessor on each
// level, from the skiplist and the table (slot: the table's slot that
// points at it):
//  1. log, in one batch, the links on x's levels (addChange), the header
//     and the table's slot and count;
//  2. unlink x from both (its own links are left as they were).
func (c *pColl) unlinkAt(tx *engram.Tx, update *[zMaxLevel]*pZNode, x *pZNode, slot **pZNode) error {
	if update[0].lv(0).Fwd != x || *slot != x {
		return errCorruptZSet
	}
	var b engram.LogBatch
	c.addChange(tx, &b, update, levelOn(update, x, int(c.ZLevel)))
	engram.BatchLog(tx, &b, c)
	c.ZDict.logLink(tx, &b, slot)
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	c.ZDict.unlinkLogged(slot, x)
	c.unlinkLogged(update, x) //engramvet:ignore the batch above: addChange's level runs, c; spans unlogged (ranked)
	c.Len--
	return nil
}

// unlinkLogged is unlinkAt's change, its ranges logged (the caller
// uncounts x from Len); the spans of the levels above x's shrink by one
// (unlogged: ranked).
func (c *pColl) unlinkLogged(update *[zMaxLevel]*pZNode, x *pZNode) {
	for i := 0; i < int(c.ZLevel); i++ {
		u := update[i].lv(i)
		if xl := x.lv(i); u.Fwd == x {
			u.Span += xl.Span - 1
			u.Fwd, u.FScore = xl.Fwd, xl.FScore
		} else {
			u.Span-- //engramvet:ignore a span is not logged (ranked)
		}
	}
	for c.ZLevel > 1 && c.ZHead.lv(int(c.ZLevel)-1).Fwd == nil {
		c.ZLevel--
	}
}

// zcount is the number of leading nodes for which before is true (before
// must hold for a prefix of the order). c must be ranked (ranks).
func (c *pColl) zcount(before func(s float64, m []byte) bool) int64 {
	var r int64
	x := c.ZHead
	for i := int(c.ZLevel) - 1; i >= 0; i-- {
		for l := x.lv(i); l.Fwd != nil && before(l.Fwd.Score, l.Fwd.member()); l = x.lv(i) {
			r += l.Span
			x = l.Fwd
		}
	}
	return r
}

// zat is the node of 0-based rank r (nil if out of range). c must be
// ranked (ranks).
func (c *pColl) zat(r int64) *pZNode {
	r++
	var trav int64
	x := c.ZHead
	for i := int(c.ZLevel) - 1; i >= 0; i-- {
		for x.lv(i).Fwd != nil && trav+x.lv(i).Span <= r {
			trav += x.lv(i).Span
			x = x.lv(i).Fwd
		}
		if trav == r {
			return x
		}
	}
	return nil
}

// ---- the commands' view

type zobj struct {
	x     *ctx
	k     []byte
	e     *pEntry
	z     *zsetv // compact (or new) value
	c     *pColl // skiplist
	dirty bool
}

// zsetObj looks k up as a sorted set; ok is false on a wrong type.
func (x *ctx) zsetObj(k []byte) (*zobj, bool, error) {
	e, wrong, err := x.typed(k, tZSet)
	if err != nil || wrong {
		return nil, false, err
	}
	o := &zobj{x: x, k: k, e: e}
	switch {
	case e == nil:
		o.z = &zsetv{scores: map[string]float64{}}
	case e.Coll != nil:
		o.c = e.Coll
	default:
		o.z = decodeZSet(e.val())
	}
	return o, true, nil
}

func (o *zobj) n() int64 {
	if o.c != nil {
		return o.c.Len
	}
	return int64(len(o.z.els))
}

func (o *zobj) score(m []byte) (float64, bool) {
	if o.c != nil {
		return o.c.zscore(m)
	}
	s, ok := o.z.scores[string(m)]
	return s, ok
}

// count is the number of leading elements for which before holds.
func (o *zobj) count(before func(s float64, m []byte) bool) int64 {
	if o.c != nil {
		o.c.ranks(o.x.tx)
		return o.c.zcount(before)
	}
	return int64(sort.Search(len(o.z.els), func(i int) bool {
		return !before(o.z.els[i].score, []byte(o.z.els[i].member))
	}))
}

// slice is the elements of ranks lo..hi-1 (clamped), ascending.
func (o *zobj) slice(lo, hi int64) []zel {
	lo, hi = max(lo, 0), min(hi, o.n())
	if lo >= hi {
		return nil
	}
	if o.c == nil {
		return append([]zel(nil), o.z.els[lo:hi]...)
	}
	out := make([]zel, 0, hi-lo)
	o.c.ranks(o.x.tx)
	for n := o.c.zat(lo); n != nil && int64(len(out)) < hi-lo; n = n.lv(0).Fwd {
		out = append(out, zel{n.Score, string(n.member())})
	}
	return out
}

// rank is m's 0-based rank.
func (o *zobj) rank(m []byte) (int64, bool) {
	s, ok := o.score(m)
	if !ok {
		return 0, false
	}
	return o.count(func(ns float64, nm []byte) bool {
		return ns < s || (ns == s && bytes.Compare(nm, m) < 0)
	}), true
}

// find is m's score and, in a skiplist, its node (for addAt).
func (o *zobj) find(m []byte) (float64, bool, *pZNode) {
	if o.c == nil {
		s, ok := o.z.scores[string(m)]
		return s, ok, nil
	}
	n := o.c.zfind(m)
	if n == nil {
		return 0, false, nil
	}
	return n.Score, true, n
}

// add sets m's score; true if m is new.
func (o *zobj) add(m []byte, s float64) (bool, error) {
	if o.c != nil {
		o.dirty = true
		return o.c.zadd(o.x.tx, m, s)
	}
	return o.addAt(m, s, nil)
}

// addAt is add with m's node from find (nil: m is absent), sparing a
// second table lookup.
func (o *zobj) addAt(m []byte, s float64, n *pZNode) (bool, error) {
	o.dirty = true
	if o.c == nil && int64(len(m)) > o.x.s.lim.zsetValue {
		// A member too long for the compact value: the skiplist first
		// (toColl), so that the member's bytes go into the pool once.
		e, err := o.x.toColl(o.k, tZSet, o.e, o.z)
		if err != nil {
			return false, err
		}
		o.e, o.c, o.z = e, e.Coll, nil
		return o.c.zadd(o.x.tx, m, s)
	}
	if o.c != nil {
		return o.c.zaddAt(o.x.tx, n, m, s, o.x.s.zhints.take(o.c, n, s))
	}
	return o.z.add(string(m), s), nil
}

func (o *zobj) rem(m []byte) (bool, error) {
	var ok bool
	var err error
	if o.c != nil {
		ok, err = o.c.zrem(o.x.tx, m)
	} else {
		ok = o.z.rem(string(m))
	}
	o.dirty = o.dirty || ok
	return ok, err
}

// done writes a changed value back (see hobj.done).
func (o *zobj) done() error {
	if !o.dirty {
		return nil
	}
	o.dirty = false
	return o.x.finish(o.k, tZSet, o.e, int(o.n()), o.c != nil, o.z)
}

var errCorruptZSet = errors.New("engram-redis: a sorted set's skiplist and table disagree")
