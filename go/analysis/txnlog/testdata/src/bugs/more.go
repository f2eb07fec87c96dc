package bugs

import "github.com/engram-pm/engram-go"

type Pair struct{ X, Y int }

type Table struct {
	Pairs []Pair
	Other []Pair
}

// A helper logs one field; the caller stores another.
func logNext(tx *engram.Tx, n *Node) { // want logNext:"logs\\(1:1 steps\\)"
	_ = tx.Log(&n.Next)
}

func helperLogsOther(tx *engram.Tx, n *Node) { // want helperLogsOther:"logs\\(1:1 steps\\)"
	logNext(tx, n)
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
}

// A struct element of a pool slice, with a different slice logged.
func pairs(tx *engram.Tx, t *Table, i int) { // want pairs:"logs\\(1:2 steps\\)"
	_ = engram.LogSlice(tx, t.Other)
	t.Pairs[i].X = 1 // want `unlogged store to pool memory: t.Pairs\[i\].X`
}

// A root looked up inside the transaction.
func rootInside(pool *engram.Pool) error {
	return pool.Txn(func(tx *engram.Tx) error {
		l, err := engram.Root[List](pool, "list")
		if err != nil {
			return err
		}
		l.Len = 0 // want `unlogged store to pool memory: l.Len`
		return nil
	})
}

// A captured variable assigned inside the closure.
func capturedCell(pool *engram.Pool) error {
	var head *Node
	err := pool.Txn(func(tx *engram.Tx) error {
		l, err := engram.Root[List](pool, "list")
		if err != nil {
			return err
		}
		head = l.Head
		head.Val = 1 // want `unlogged store to pool memory: head.Val`
		return nil
	})
	_ = head
	return err
}

// A nested transaction (flattened) over the outer function's parameter.
func nestedTxn(tx *engram.Tx, pool *engram.Pool, n *Node) error {
	return pool.Txn(func(tx2 *engram.Tx) error {
		n.Val = 1 // want `unlogged store to pool memory: n.Val`
		return nil
	})
}

// A generic helper.
func setFirst[T any](s []T, v T) { // want setFirst:"store\\(0:s\\[0\\]\\)"
	s[0] = v
}

func generic(tx *engram.Tx, n *Node) {
	setFirst(n.Items, 5) // want `unlogged store to pool memory in call to setFirst: s\[0\]`
}

// Two stores to one location are one missing log; a second location is
// another.
func twice(tx *engram.Tx, n *Node) {
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
	n.Val = 2
	n.Next = nil // want `unlogged store to pool memory: n.Next`
}

// A slice of an array inside a pool object.
func arraySlice(tx *engram.Tx, n *Node) {
	arr := n.Arr[:]
	arr[1] = 5 // want `unlogged store to pool memory: arr\[1\]`
}

// A pointer to a pool element.
func elemPointer(tx *engram.Tx, n *Node, i int) {
	p := &n.Items[i]
	*p = 3 // want `unlogged store to pool memory: \*p`
}

// The log covers a different element of the same slice.
func otherElement(tx *engram.Tx, n *Node) { // want otherElement:"logs\\(1:3 steps\\)"
	_ = tx.Log(&n.Items[1])
	n.Items[2] = 1 // want `unlogged store to pool memory: n.Items\[2\]`
}

// Fresh memory, then pool memory reached from it.
func freshThenPool(tx *engram.Tx, l *List) error {
	n, err := engram.New[Node](tx)
	if err != nil {
		return err
	}
	n.Next = l.Head
	n.Next.Val = 3 // want `unlogged store to pool memory: n.Next.Val`
	return nil
}

// The logged object is no longer the one stored to: the pointer it was
// reached through changed after the log.
func relinkAfterLog(tx *engram.Tx, l *List, m *Node) { // want relinkAfterLog:"logs\\(1:1 steps\\)"
	_ = tx.Log(&l.Head)
	_ = tx.Log(&l.Head.Val)
	l.Head = m
	l.Head.Val = 1 // want `unlogged store to pool memory: l.Head.Val`
}

// The same for a logged slice whose header is replaced.
func resliceAfterLog(tx *engram.Tx, n *Node, other []int) { // want resliceAfterLog:"logs\\(1:1 steps\\)"
	_ = tx.Log(&n.Items)
	_ = engram.LogSlice(tx, n.Items)
	n.Items = other
	n.Items[0] = 1 // want `unlogged store to pool memory: n.Items\[0\]`
}

// Logged on each branch, but one branch logs the wrong field.
func branchesWrongField(tx *engram.Tx, n *Node, c bool) {
	if c {
		_ = tx.Log(&n.Val)
	} else {
		_ = tx.Log(&n.Next)
	}
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
}

// Logged inside a loop that may run zero times.
func loopMaybeZero(tx *engram.Tx, n *Node, k int) {
	for i := 0; i < k; i++ {
		_ = tx.Log(n)
	}
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
}

// A constructor helper given an existing pool node instead of a fresh one.
func initPool(tx *engram.Tx, n *Node, v int) { // want initPool:"store\\(1:n.Val\\)"
	n.Val = v
}

func reinit(tx *engram.Tx, l *List) {
	initPool(tx, l.Head, 0) // want `unlogged store to pool memory in call to initPool: n.Val`
}

type Holder struct{ A []int }

// Memory allocated by an earlier transaction is pool memory in a later one.
func twoTxns(pool *engram.Pool) error {
	var h *Holder
	if err := pool.Txn(func(tx *engram.Tx) (err error) {
		if h, err = engram.New[Holder](tx); err != nil {
			return err
		}
		if h.A, err = engram.Make[int](tx, 4, 4); err != nil {
			return err
		}
		for i := range h.A {
			h.A[i] = i
		}
		return nil
	}); err != nil {
		return err
	}
	a := h.A
	return pool.Txn(func(tx *engram.Tx) error {
		a[0] = 7 // want `unlogged store to pool memory: a\[0\]`
		return nil
	})
}

// A fresh node handed to a helper that links it to a pool node: what it
// points to afterwards is pool memory.
func freshLinked(tx *engram.Tx, l *List) error {
	n, err := engram.New[Node](tx)
	if err != nil {
		return err
	}
	link(n, l.Head)
	n.Next.Val = 1 // want `unlogged store to pool memory: n.Next.Val`
	return nil
}

// go-pmem style: the root kept in a Go global, set when the pool opens.
var theList *List

func open(pool *engram.Pool) error {
	l, err := engram.Root[List](pool, "list")
	if err != nil {
		return err
	}
	theList = l
	return nil
}

func bumpGlobal(pool *engram.Pool) error {
	return pool.Txn(func(tx *engram.Tx) error {
		theList.Len++ // want `unlogged store to pool memory: theList.Len`
		return nil
	})
}

// A global that is both stored and read by one function.
var cursor *Node

func advance(tx *engram.Tx, l *List) {
	if cursor == nil {
		cursor = l.Head
	}
	cursor.Val = 0 // want `unlogged store to pool memory: cursor.Val`
	cursor = cursor.Next
}

// The pointer a log went through is replaced by a helper.
func setHead(l *List, n *Node) { // want setHead:"store\\(0:l.Head\\)"
	l.Head = n
}

func relinkByHelper(tx *engram.Tx, l *List, m *Node) { // want relinkByHelper:"logs\\(1:1 steps\\)"
	_ = tx.Log(&l.Head)
	_ = tx.Log(&l.Head.Val)
	setHead(l, m)
	l.Head.Val = 1 // want `unlogged store to pool memory: l.Head.Val`
}
