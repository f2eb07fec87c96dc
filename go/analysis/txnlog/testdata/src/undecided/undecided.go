// Package undecided holds the stores the analyzer cannot decide statically:
// each must be reported as "cannot decide", never passed over in silence.
package undecided

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"unsafe"

	"github.com/engram-pm/engram-go"
)

type Node struct {
	Val   int
	Items []int
}

type Setter interface{ Set(v int) }

func (n *Node) Set(v int) { n.Val = v } // want Set:"store\\(0:n.Val\\)"

// Through an interface method.
func viaInterface(tx *engram.Tx, n *Node) {
	var s Setter = n
	s.Set(1) // want `cannot decide: call through interface method Set may store to pool memory`
}

// Through a function value.
func viaFuncValue(tx *engram.Tx, n *Node, f func(*Node)) {
	f(n) // want `cannot decide: call of a function value \(f\) may store to pool memory`
}

// Through a pointer of unknown provenance (a Go global set from a map).
var cached *Node

func setCache(m map[int]*Node) { cached = m[0] }

func viaGlobal(tx *engram.Tx) {
	cached.Val = 1 // want `cannot decide: cached.Val is written through a pointer of unknown provenance`
}

// Through a map of pointers.
func viaMap(tx *engram.Tx, m map[int]*Node) {
	m[1].Val = 2 // want `cannot decide: m\[1\].Val is written through a pointer of unknown provenance`
}

// A logged range whose bounds are not known statically.
func varRange(tx *engram.Tx, n *Node, i, j, k int) {
	items := n.Items
	_ = engram.LogSlice(tx, items[i:j])
	items[k] = 1 // want `cannot decide: the logged range may not cover items\[k\]`
}

// A function outside the module given pool memory.
func viaStdlib(tx *engram.Tx, n *Node) {
	sort.Ints(n.Items) // want `cannot decide: call to sort.Ints outside the module may store to pool memory passed to it`
}

// A helper in the module that calls a function value: undecided at the call.
func apply(n *Node, f func(int) int) { // want apply:"undecided\\(-1:call of a function value \\(f\\) may store to pool memory\\)"
	n.Val = f(n.Val)
}

func viaHelper(tx *engram.Tx, n *Node, g func(int) int) { // want viaHelper:"logs\\(1:1 steps\\)"
	_ = tx.Log(&n.Val)
	apply(n, g) // want `cannot decide: in call to apply: call of a function value \(f\) may store to pool memory`
}

// A pointer received from a channel.
func viaChannel(tx *engram.Tx, ch chan *Node) {
	select {
	case n := <-ch:
		n.Val = 1 // want `cannot decide: n.Val is written through a pointer of unknown provenance`
	default:
	}
}

type Bank struct{ Accounts []int64 }

// The crash explorer's seeded bug (a log skipped when logTo is false): the
// log of from dominates the store to to, and from may equal to.
func transferMaybeMissing(pool *engram.Pool, b *Bank, from, to int, logTo bool) error {
	return pool.Txn(func(tx *engram.Tx) error {
		if err := engram.LogSlice(tx, b.Accounts[from:from+1]); err != nil {
			return err
		}
		if logTo {
			if err := tx.Log(&b.Accounts[to]); err != nil {
				return err
			}
		}
		b.Accounts[from] -= 10
		b.Accounts[to] += 10 // want `cannot decide: the logged range may not cover b.Accounts\[to\]`
		return nil
	})
}

// A counted loop one past the logged range.
func clearPastRange(tx *engram.Tx, n *Node, lo, hi int) {
	items := n.Items
	_ = engram.LogSlice(tx, items[lo:hi])
	for k := lo; k <= hi; k++ {
		items[k] = 0 // want `cannot decide: the logged range may not cover items\[k\]`
	}
}

// fmt reads its arguments, except the scanners, which write them.
func viaScan(tx *engram.Tx, n *Node, s string) {
	fmt.Println(n)
	_, _ = fmt.Sscan(s, &n.Val) // want `cannot decide: call to fmt.Sscan outside the module may store to pool memory passed to it`
}

// An exported global may be set by any package.
var Shared *Node

func viaExported(tx *engram.Tx) {
	Shared.Val = 1 // want `cannot decide: Shared.Val is written through a pointer of unknown provenance`
}

type Entry struct{ Key []byte }

// A bytes method writing through its argument, and a bytes function given
// a function to call.
func viaBytes(tx *engram.Tx, e *Entry, r *bytes.Reader) {
	_, _ = r.Read(e.Key)                                            // want `cannot decide: call to \(\*bytes.Reader\).Read outside the module may store to pool memory passed to it`
	_ = bytes.IndexFunc(e.Key, func(r rune) bool { return r == 0 }) // want `cannot decide: call to bytes.IndexFunc outside the module may store to pool memory passed to it`
}

// An address computed from an integer.
func viaUintptr(tx *engram.Tx, n *Node) {
	p := (*int)(unsafe.Pointer(uintptr(unsafe.Pointer(n)) + unsafe.Offsetof(n.Val)))
	*p = 1 // want `cannot decide: \*p is written through a pointer of unknown provenance`
}

// A generator reading into pool memory.
func viaRandRead(tx *engram.Tx, e *Entry, r *rand.Rand) {
	_, _ = r.Read(e.Key) // want `cannot decide: call to \(\*math/rand.Rand\).Read outside the module may store to pool memory passed to it`
}

// A type parameter whose constraint lists methods only: any type may be
// it, so its method is no better known than an interface's.
func viaTypeParam[S Setter](tx *engram.Tx, s S) {
	s.Set(1) // want `cannot decide: call through method Set of type parameter S \(its type set is not a finite list of types\) may store to pool memory`
}

// A type parameter constrained by any: a method is reached only through
// an interface.
func viaAny[T any](tx *engram.Tx, v T) {
	if s, ok := any(v).(Setter); ok {
		s.Set(1) // want `cannot decide: call through interface method Set may store to pool memory`
	}
}

// A ~T term over a type that is not a pointer: every defined type over
// []int (Ints, and any other) may declare its own Set.
type Ints []int

func (s Ints) Set(v int) { s[0] = v } // want Set:"store\\(0:s\\[0\\]\\)"

func viaTilde[S interface {
	~[]int
	Set(v int)
}](tx *engram.Tx, s S) {
	s.Set(1) // want `cannot decide: call through method Set of type parameter S \(its type set is not a finite list of types\) may store to pool memory`
}

// A finite type set where one member's method cannot be decided: the call
// cannot be either, for that member.
type Sorted struct{ Items []int }

func (s *Sorted) tidy() { sort.Ints(s.Items) } // want tidy:"undecided\\(0:call to sort.Ints outside the module may store to pool memory passed to it\\)"

func (n *Node) tidy() {}

func viaMember[T interface {
	*Node | *Sorted
	tidy()
}](tx *engram.Tx, t T) {
	t.tidy() // want `cannot decide: in call to Sorted.tidy: call to sort.Ints outside the module may store to pool memory passed to it for T = \*Sorted \(undecided.go:\d+\)`
}

// A member whose method the analysis cannot reach: promoted from an
// embedded field into a generic type.
type Inner struct{ V int }

func (i *Inner) poke() { i.V = 1 } // want poke:"store\\(0:i.V\\)"

type Gen[T any] struct {
	Inner
	X T
}

func viaPromoted[E any, G interface {
	*Gen[E]
	poke()
}](tx *engram.Tx, g G) {
	g.poke() // want `cannot decide: call through method poke of type parameter G = \*Gen\[E\] may store to pool memory`
}
