// More seeded bugs: calls in all their forms.
package bugs

import (
	"errors"

	"github.com/engram-pm/engram-go"
)

type Tree struct {
	Val  int
	Next *Tree
	Kids [2]*Tree
}

func (n *Tree) SetVal(v int) { n.Val = v } // want SetVal:"store\\(0:n.Val\\)"

type Box[T any] struct{ V T }

func (b *Box[T]) Put(v T) { b.V = v } // want Put:"store\\(0:b.V\\)"

func methodValue(tx *engram.Tx, n *Tree) {
	f := n.SetVal
	f(3) // want `unlogged store to pool memory in call to Tree.SetVal: n.Val`
}

func methodExpr(tx *engram.Tx, n *Tree) {
	(*Tree).SetVal(n, 4) // want `unlogged store to pool memory in call to Tree.SetVal: n.Val`
}

func deferred(tx *engram.Tx, n *Tree) {
	defer n.SetVal(5) // want `unlogged store to pool memory in call to Tree.SetVal: n.Val`
}

func goroutine(tx *engram.Tx, n *Tree) {
	go n.SetVal(6) // want `unlogged store to pool memory in call to Tree.SetVal: n.Val`
}

func genericMethod(tx *engram.Tx, b *Box[int]) {
	b.Put(1) // want `unlogged store to pool memory in call to Box.Put: b.V`
}

func rec(n *Tree, d int) { // want rec:"store\\(0:n.Val\\)"
	if n == nil {
		return
	}
	n.Val = d
	rec(n.Next, d+1)
}

func useRec(tx *engram.Tx, n *Tree) {
	rec(n, 0) // want `unlogged store to pool memory in call to rec: n.Val`
}

func typeSwitch(tx *engram.Tx, x any) {
	switch v := x.(type) {
	case *Tree:
		v.Val = 1 // want `unlogged store to pool memory: v.Val`
	}
}

func errs(tx *engram.Tx, n *Tree) error {
	err := errors.New("x")
	if errors.Is(err, err) {
		return err
	}
	n.Kids[1].Val = 2 // want `unlogged store to pool memory: n.Kids\[1\].Val`
	return nil
}

func panics(tx *engram.Tx, n *Tree) {
	defer func() { // want `unlogged store to pool memory in call to func literal in panics: n.Val`
		if r := recover(); r != nil {
			n.Val = 0
		}
	}()
	panic("x")
}
