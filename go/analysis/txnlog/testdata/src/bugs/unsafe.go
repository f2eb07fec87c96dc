package bugs

import (
	"unsafe"

	"github.com/engram-pm/engram-go"
)

// Pool memory seen through unsafe views keeps its provenance.
func viaSliceData(tx *engram.Tx, n *Node) {
	p := unsafe.SliceData(n.Items)
	*p = 1 // want `unlogged store to pool memory: \*p`
}

func viaPointerCast(tx *engram.Tx, l *List) {
	m := (*Node)(unsafe.Pointer(l.Head))
	m.Val = 1 // want `unlogged store to pool memory: m.Val`
}

func viaUnsafeSlice(tx *engram.Tx, n *Node) {
	s := unsafe.Slice(&n.Val, 1)
	s[0] = 2 // want `unlogged store to pool memory: s\[0\]`
}
