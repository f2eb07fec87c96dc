package bugs

import "github.com/engram-pm/engram-go"

// Method calls on a type parameter whose constraint is a finite union:
// checked once per member type; the member whose store is not logged is
// named, and a caller instantiating with the other member is not told.

type Cell struct{ V int }

type Slot struct{ W, V int }

func (c *Cell) put(v int) { c.V = v } // want put:"store\\(0:c.V\\)"

func (s *Slot) put(v int) { s.V = v } // want put:"store\\(0:s.V\\)"

func (c *Cell) logAll(tx *engram.Tx) { _ = tx.Log(c) } // want logAll:"logs\\(0:0 steps\\)"

func (s *Slot) logAll(tx *engram.Tx) {} // logs nothing

type putter interface {
	*Cell | *Slot
	put(v int)
	logAll(tx *engram.Tx)
}

func putVia[P putter](p P, v int) { // want putVia:"store\\(0:c.V for P = \\*Cell\\) store\\(0:s.V for P = \\*Slot\\)"
	p.put(v)
}

// The caller logs what (*Cell).put writes, not what (*Slot).put does.
func putBoth(tx *engram.Tx, c *Cell, s *Slot) { // want putBoth:"logs\\(1:1 steps\\) logs\\(2:1 steps\\)"
	_ = tx.Log(&c.V)
	_ = tx.Log(&s.W)
	putVia(c, 1)
	putVia(s, 2) // want `unlogged store to pool memory in call to putVia: s.V for P = \*Slot`
}

// Through a second generic helper: its type parameter is putVia's.
func putAgain[Q putter](q Q) { // want putAgain:"store\\(0:c.V for P = \\*Cell\\) store\\(0:s.V for P = \\*Slot\\)"
	putVia(q, 1)
}

func putNested(tx *engram.Tx, c *Cell, s *Slot) { // want putNested:"logs\\(1:1 steps\\)"
	_ = tx.Log(&c.V)
	putAgain(c)
	putAgain(s) // want `unlogged store to pool memory in call to putAgain: s.V for P = \*Slot`
}

// A log counts only if every member's method makes it: (*Slot).logAll
// logs nothing.
func logVia[P putter](tx *engram.Tx, p P) {
	p.logAll(tx)
}

func logThenPut(tx *engram.Tx, s *Slot) {
	logVia(tx, s)
	putVia(s, 2) // want `unlogged store to pool memory in call to putVia: s.V for P = \*Slot`
}

// A transactional generic function: each member's store reported.
func PutZero[P putter](tx *engram.Tx, p P) {
	p.put(0) // want `unlogged store to pool memory in call to Cell.put: c.V for P = \*Cell` `unlogged store to pool memory in call to Slot.put: s.V for P = \*Slot`
}
