// Package fixes checks -fix: each missing log gets a tx.Log before its
// statement (fixes.go.golden is the file after all fixes).
package fixes

import "github.com/engram-pm/engram-go"

type Node struct {
	Val  int
	Next *Node
	Arr  [4]int
}

type List struct {
	Head *Node
	Len  int
}

func link(a, b *Node) { // want link:"store\\(0:a.Next\\)"
	a.Next = b
}

func push(pool *engram.Pool, l *List, v int) error {
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

func set(tx *engram.Tx, n *Node, i int) {
	n.Val = 1    // want `unlogged store to pool memory: n.Val`
	n.Arr[i] = 2 // want `unlogged store to pool memory: n.Arr\[i\]`
	if n.Next != nil {
		*n.Next = Node{} // want `unlogged store to pool memory: \*n.Next`
	}
}

func relink(tx *engram.Tx, a, b *Node) error {
	link(a, b) // want `unlogged store to pool memory in call to link: a.Next`
	return nil
}
