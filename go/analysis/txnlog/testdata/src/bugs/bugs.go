// Package bugs is the corpus of seeded missed-log bugs: every line with an
// expectation is one bug the analyzer must report.
package bugs

import (
	"sync/atomic"

	"github.com/engram-pm/engram-go"
	"lib"
)

type Inner struct{ X, Y int }

type Node struct {
	Val   int
	Count int64
	Next  *Node
	Items []int
	Arr   [4]int
	Name  string
	In    Inner
	Cell  *lib.Cell
}

type List struct {
	Head *Node
	Len  int
}

// A root captured by a Txn closure.
func pushFront(pool *engram.Pool, v int) error {
	l, err := engram.Root[List](pool, "list")
	if err != nil {
		return err
	}
	return pool.Txn(func(tx *engram.Tx) error {
		n, err := engram.New[Node](tx)
		if err != nil {
			return err
		}
		n.Val = v
		n.Next = l.Head
		l.Head = n // want `unlogged store to pool memory: l.Head`
		l.Len++    // want `unlogged store to pool memory: l.Len`
		return nil
	})
}

// A parameter of a *Tx function, through a field.
func setVal(tx *engram.Tx, n *Node, v int) {
	n.Val = v // want `unlogged store to pool memory: n.Val`
}

// A slice element reached through a field.
func setItem(tx *engram.Tx, n *Node, i, v int) {
	n.Items[i] = v // want `unlogged store to pool memory: n.Items\[i\]`
}

// An array element inside the object.
func setArr(tx *engram.Tx, n *Node) {
	n.Arr[2] = 1 // want `unlogged store to pool memory: n.Arr\[2\]`
}

// A whole object through a pointer.
func replace(tx *engram.Tx, n *Node, m Node) {
	*n = m // want `unlogged store to pool memory: \*n`
}

// A method receiver in a method taking the transaction.
func (n *Node) SetNext(tx *engram.Tx, m *Node) {
	n.Next = m // want `unlogged store to pool memory: n.Next`
}

// A method without the transaction, called inside one.
func (n *Node) bump() { // want bump:"store\\(0:n.Val\\)"
	n.Val++
}

func bumpHead(tx *engram.Tx, l *List) {
	l.Head.bump() // want `unlogged store to pool memory in call to Node.bump: n.Val`
}

// A helper in the same package.
func link(a, b *Node) { // want link:"store\\(0:a.Next\\)"
	a.Next = b
}

func linkAfter(tx *engram.Tx, a, b *Node) error { // want linkAfter:"logs\\(2:1 steps\\)"
	if err := tx.Log(&b.Next); err != nil {
		return err
	}
	b.Next = a.Next
	link(a, b) // want `unlogged store to pool memory in call to link: a.Next`
	return nil
}

// A helper in another package of the module, directly and one call deeper.
func setCell(tx *engram.Tx, n *Node) {
	lib.Set(n.Cell, 1)   // want `unlogged store to pool memory in call to lib.Set: c.V`
	lib.Chain(n.Cell, 2) // want `unlogged store to pool memory in call to lib.Chain: c.V`
	_ = lib.Get(n.Cell)
}

// Walking a list: the node comes through a loop phi.
func zero(tx *engram.Tx, l *List) {
	for n := l.Head; n != nil; n = n.Next {
		n.Val = 0 // want `unlogged store to pool memory: n.Val`
	}
}

// The log comes after the store.
func logLate(tx *engram.Tx, n *Node) { // want logLate:"logs\\(1:1 steps\\)"
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
	_ = tx.Log(&n.Val)
}

// The log is on one branch only.
func logOneBranch(tx *engram.Tx, n *Node, c bool) {
	if c {
		_ = tx.Log(n)
	}
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
}

// The wrong field is logged.
func logWrongField(tx *engram.Tx, n *Node) { // want logWrongField:"logs\\(1:1 steps\\)"
	_ = tx.Log(&n.Next)
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
}

// The logged range misses the element.
func logWrongRange(tx *engram.Tx, n *Node) {
	_ = engram.LogSlice(tx, n.Items[0:2])
	n.Items[3] = 1 // want `unlogged store to pool memory: n.Items\[3\]`
}

// copy into pool memory.
func copyIn(tx *engram.Tx, n *Node, src []int) {
	copy(n.Items, src) // want `unlogged store to pool memory: the elements of n.Items`
}

// An atomic add.
func count(tx *engram.Tx, n *Node) {
	atomic.AddInt64(&n.Count, 1) // want `unlogged store to pool memory: n.Count`
}

// A value loaded from pool memory.
func second(tx *engram.Tx, l *List) {
	m := l.Head.Next
	m.Val = 2 // want `unlogged store to pool memory: m.Val`
}

// A helper's result derives from its argument.
func find(l *List, v int) *Node { // want find:"result\\(0:volatile\\|p0\\)"
	for n := l.Head; n != nil; n = n.Next {
		if n.Val == v {
			return n
		}
	}
	return nil
}

func setFound(tx *engram.Tx, l *List) {
	n := find(l, 3)
	n.Val = 9 // want `unlogged store to pool memory: n.Val`
}

// A closure helper inside the transaction.
func closureHelper(pool *engram.Pool, l *List) error {
	return pool.Txn(func(tx *engram.Tx) error {
		set := func(n *Node) { n.Val = 7 }
		set(l.Head) // want `unlogged store to pool memory in call to func literal in closureHelper\$1: n.Val`
		return nil
	})
}

// A helper that walks a list it was given.
func clearAll(l *List) { // want clearAll:"store\\(0:n.Val\\)"
	for n := l.Head; n != nil; n = n.Next {
		n.Val = 0
	}
}

func clearList(tx *engram.Tx, l *List) { // want clearList:"logs\\(1:0 steps\\)"
	_ = tx.Log(l)
	clearAll(l) // want `unlogged store to pool memory in call to clearAll: n.Val`
}

// Logging a slice header does not log its elements.
func headerOnly(tx *engram.Tx, n *Node) { // want headerOnly:"logs\\(1:1 steps\\)"
	_ = tx.Log(&n.Items)
	n.Items[0] = 1 // want `unlogged store to pool memory: n.Items\[0\]`
}

// A whole object through a loaded pointer.
func resetHead(tx *engram.Tx, l *List) {
	*l.Head = Node{} // want `unlogged store to pool memory: \*l.Head`
}

// A string copied into the pool, stored into an unlogged field.
func rename(tx *engram.Tx, n *Node, s string) error {
	ps, err := engram.String(tx, s)
	if err != nil {
		return err
	}
	n.Name = ps // want `unlogged store to pool memory: n.Name`
	return nil
}

// A nested struct field with a sibling logged.
func nested(tx *engram.Tx, n *Node) { // want nested:"logs\\(1:2 steps\\)"
	_ = tx.Log(&n.In.Y)
	n.In.X = 1 // want `unlogged store to pool memory: n.In.X`
}

// A method that opens its own transaction over its receiver.
func (l *List) Push(pool *engram.Pool, n *Node) error {
	return pool.Txn(func(tx *engram.Tx) error {
		_ = tx.Log(&n.Next)
		n.Next = l.Head
		l.Head = n // want `unlogged store to pool memory: l.Head`
		return nil
	})
}

// A pool slice from a loaded field, stored in a loop.
func fill(tx *engram.Tx, n *Node) {
	items := n.Items
	for i := range items {
		items[i] = i // want `unlogged store to pool memory: items\[i\]`
	}
}
