package correct

import "github.com/engram-pm/engram-go"

// Method calls on a type parameter whose constraint is a finite union (a
// type, or ~ of a pointer type): every member's method checked, each
// member's store logged.

type Cell struct{ V int }

type Slot struct{ W, V int }

func (c *Cell) put(v int) { c.V = v } // want put:"store\\(0:c.V\\)"

func (s *Slot) put(v int) { s.V = v } // want put:"store\\(0:s.V\\)"

func (c *Cell) logAll(tx *engram.Tx) { _ = tx.Log(c) } // want logAll:"logs\\(0:0 steps\\)"

func (s *Slot) logAll(tx *engram.Tx) { _ = tx.Log(s) } // want logAll:"logs\\(0:0 steps\\)"

type cellOrSlot interface {
	~*Cell | *Slot
	put(v int)
	logAll(tx *engram.Tx)
}

func putVia[P cellOrSlot](p P, v int) { // want putVia:"store\\(0:c.V for P = \\*Cell\\) store\\(0:s.V for P = \\*Slot\\)"
	p.put(v)
}

// Both members log the whole object.
func logVia[P cellOrSlot](tx *engram.Tx, p P) { // want logVia:"logs\\(1:0 steps\\)"
	p.logAll(tx)
}

// (*Slot).put writes field 1, which a *Cell does not have: not reported
// for the *Cell.
func putLogged(tx *engram.Tx, c *Cell, s *Slot) { // want putLogged:"logs\\(1:1 steps\\) logs\\(2:0 steps\\)"
	_ = tx.Log(&c.V)
	putVia(c, 1)
	logVia(tx, s)
	putVia(s, 2)
}

// A transactional generic function logging through every member.
func Reset[P cellOrSlot](tx *engram.Tx, p P) { // want Reset:"logs\\(1:0 steps\\)"
	p.logAll(tx)
	p.put(0)
}
