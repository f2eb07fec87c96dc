// zlog.go: the ranges a skiplist change logs, cut to the words it
// writes that are logged. A link change writes a level's link and the
// score beside it (pZLink, the element's first 16 bytes) and its span,
// which is not logged (ranked); a move also writes the node's score and
// its own levels. So a run of a node's levels lo..hi-1 logs from L[lo]
// to the end of L[hi-1]'s link (the spans of the levels inside the run
// come with it), and a moved node of level k logs from its score (the
// last word of its element 1) to the end of L[k-1]'s link: 24k bytes
// where whole elements took 24k+24, and a run 24k-8 where it took 24k.
// In wal mode every logged range is written into the log twice (its undo
// entry's old bytes and its new bytes at commit), so a level-1 node's
// move logs 56 bytes of ranges where it logged 96.
//
// What it keeps true: linkRun and moveRange are the ranges
// batchLogLinks and batchLogMove log (the same start and length: the
// prelog's ranges, zwarm.go, must start where the command's do and
// cover them, engram.Tx's aheadTable.covers), and every range is typed for checked
// mode (its pointer words are the levels' Fwd): runs and nodes up to
// zTypedLevels levels, longer ones (1 in 256 nodes) as whole elements.
package redis

import (
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

// pZRun is a run of k levels as logged, after a head word (H: struct{}
// for a link change's run, float64 for a moved node's score): k-1 whole
// levels, then the last one's link (its span not logged). A is
// [k-1]pZLevel.
type pZRun[H, A any] struct {
	Head H
	L    A
	Last pZLink
}

// zTypedLevels is the longest run logged without its last span.
const zTypedLevels = 4

// The layouts above, checked at compile time: a run of k levels is 24k-8
// bytes, a moved node's is 24k, starting at the node's score.
var (
	_ = [1]int{}[unsafe.Sizeof(pZRun[struct{}, [0]pZLevel]{})-unsafe.Sizeof(pZLink{})]
	_ = [1]int{}[unsafe.Sizeof(pZRun[struct{}, [3]pZLevel]{})+8-4*unsafe.Sizeof(pZLevel{})]
	_ = [1]int{}[unsafe.Sizeof(pZRun[float64, [0]pZLevel]{})-unsafe.Sizeof(pZLevel{})]
	_ = [1]int{}[unsafe.Offsetof(pZNode{}.L)-unsafe.Offsetof(pZNode{}.Score)-unsafe.Offsetof(pZRun[float64, [0]pZLevel]{}.L)]
)

// linkRun is the range a change of n's links on levels lo..hi-1 logs.
func linkRun(n *pZNode, lo, hi int) (uintptr, uintptr) {
	k := uintptr(hi - lo)
	size := k * unsafe.Sizeof(pZLevel{})
	if k <= zTypedLevels {
		size -= unsafe.Sizeof(pZLevel{}) - unsafe.Sizeof(pZLink{})
	}
	if k == 1 && plantLinkLogsNoScore {
		size = unsafe.Sizeof(n.L[0].Fwd)
	}
	return uintptr(unsafe.Pointer(n.lv(lo))), size
}

// plantLinkLogsNoScore is for the crash explorer's planted-fault test
// only: a one-level link change logs the link but not the score beside
// it (one word short), here and in what the prelog logs ahead.
var plantLinkLogsNoScore bool

// moveRange is the range a move of x (of the given level) logs on x.
func moveRange(x *pZNode, level int) (uintptr, uintptr) {
	if level > zTypedLevels {
		els := x.elems(level)[zNodeScore:]
		return uintptr(unsafe.Pointer(&els[0])), uintptr(len(els)) * unsafe.Sizeof(pZLevel{})
	}
	return uintptr(unsafe.Pointer(&x.Score)), uintptr(level) * unsafe.Sizeof(pZLevel{})
}

// batchLogLinks adds linkRun(n, lo, hi) to b.
func batchLogLinks(tx *engram.Tx, b *engram.LogBatch, n *pZNode, lo, hi int) {
	if hi-lo == 1 && plantLinkLogsNoScore {
		engram.BatchLog(tx, b, &n.lv(lo).Fwd)
		return
	}
	if !batchLogRun[struct{}](tx, b, unsafe.Pointer(n.lv(lo)), hi-lo) {
		engram.BatchLogSlice(tx, b, n.L[lo:hi])
	}
}

// batchLogMove adds moveRange(x, level) to b.
func batchLogMove(tx *engram.Tx, b *engram.LogBatch, x *pZNode, level int) {
	if !batchLogRun[float64](tx, b, unsafe.Pointer(&x.Score), level) {
		engram.BatchLogSlice(tx, b, x.elems(level)[zNodeScore:])
	}
}

// batchLogRun adds to b the pZRun of head H and k levels at p, typed;
// false (nothing added) for a run longer than zTypedLevels.
func batchLogRun[H any](tx *engram.Tx, b *engram.LogBatch, p unsafe.Pointer, k int) bool {
	switch k {
	case 1:
		engram.BatchLog(tx, b, (*pZRun[H, [0]pZLevel])(p))
	case 2:
		engram.BatchLog(tx, b, (*pZRun[H, [1]pZLevel])(p))
	case 3:
		engram.BatchLog(tx, b, (*pZRun[H, [2]pZLevel])(p))
	case 4:
		engram.BatchLog(tx, b, (*pZRun[H, [3]pZLevel])(p))
	default:
		return false
	}
	return true
}
