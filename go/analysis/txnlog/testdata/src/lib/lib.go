// Package lib is a helper package in the same module as bugs: its stores
// reach the transactions of its callers only through its summaries.
package lib

// Cell is a persistent cell.
type Cell struct {
	V    int
	Next *Cell
}

// Set stores v into c without logging it.
func Set(c *Cell, v int) {
	c.V = v
}

// Chain stores into the cell after c.
func Chain(c *Cell, v int) {
	setNext(c.Next, v)
}

func setNext(c *Cell, v int) {
	c.V = v
}

// Get only reads.
func Get(c *Cell) int { return c.V }

// Buf is said to be Go heap memory.
//
//engramvet:volatile scratch space
type Buf struct{ B []byte } // want Buf:"volatile"
