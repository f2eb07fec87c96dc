// Package correct is the corpus of correct programs: the analyzer must say
// nothing here, except on the lines marked as known false positives (each
// listed in docs/engramvet.md).
package correct

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime/metrics"
	"sort"
	"strings"

	"github.com/engram-pm/engram-go"
)

type Node struct {
	Val   int
	Next  *Node
	Items []int
	Arr   [4]int
	Name  string
}

type List struct {
	Head *Node
	Len  int
}

// A field logged before its store.
func setVal(tx *engram.Tx, n *Node, v int) error { // want setVal:"logs\\(1:1 steps\\)"
	if err := tx.Log(&n.Val); err != nil {
		return err
	}
	n.Val = v
	return nil
}

// The whole struct logged covers every field.
func setAll(tx *engram.Tx, n *Node, v int) { // want setAll:"logs\\(1:0 steps\\)"
	_ = tx.Log(n)
	n.Val = v
	n.Next = nil
	n.Arr[1] = v
}

// Fresh objects need no log, nor do the roots they are linked from once
// logged.
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
		if err := tx.Log(l); err != nil {
			return err
		}
		l.Head = n
		l.Len++
		return nil
	})
}

// A whole slice logged, then every element stored.
func fill(tx *engram.Tx, n *Node) { // want fill:"logs\\(1:2 steps\\)"
	_ = engram.LogSlice(tx, n.Items)
	for i := range n.Items {
		n.Items[i] = i
	}
}

// One element logged by a one-element range.
func setItem(tx *engram.Tx, n *Node, i, v int) {
	items := n.Items
	_ = engram.LogSlice(tx, items[i:i+1])
	items[i] = v
}

// A constant range covering a constant index.
func setThird(tx *engram.Tx, n *Node) {
	items := n.Items
	_ = engram.LogSlice(tx, items[2:5])
	items[3] = 1
}

// An element logged by address.
func setElem(tx *engram.Tx, n *Node, i int) { // want setElem:"logs\\(1:3 steps\\)"
	items := n.Items
	_ = tx.Log(&items[i])
	items[i] = 0
}

// Volatile locals need no log.
func locals(tx *engram.Tx, n *Node) int {
	tmp := &Node{}
	tmp.Val = n.Val
	buf := make([]int, 3)
	buf[0] = tmp.Val
	var arr [3]int
	arr[1] = buf[0]
	c := *n
	c.Val = 3
	return arr[1] + c.Val
}

// A helper's store is covered by the caller's log.
func link(a, b *Node) { // want link:"store\\(0:a.Next\\)"
	a.Next = b
}

func linkAfter(tx *engram.Tx, a, b *Node) { // want linkAfter:"logs\\(2:1 steps\\) logs\\(1:1 steps\\)"
	_ = tx.Log(&b.Next)
	b.Next = a.Next
	_ = tx.Log(&a.Next)
	link(a, b)
}

// A log inside a loop covers the node of the same iteration.
func zero(tx *engram.Tx, l *List) {
	for n := l.Head; n != nil; n = n.Next {
		_ = tx.Log(n)
		n.Val = 0
	}
}

// Slices made in the transaction are fresh.
func makeItems(tx *engram.Tx, n *Node) error {
	items, err := engram.Make[int](tx, 4, 4)
	if err != nil {
		return err
	}
	items[0] = 1
	copy(items[1:], []int{2, 3})
	_ = tx.Log(&n.Items)
	n.Items = items
	return nil
}

// Reads only.
func show(tx *engram.Tx, n *Node) {
	fmt.Println(n.Val, n.Name)
}

// An array inside the object logged whole.
func setArr(tx *engram.Tx, n *Node, i int) { // want setArr:"logs\\(1:1 steps\\)"
	_ = tx.Log(&n.Arr)
	n.Arr[i] = 1
}

// A fresh node returned by a helper.
func newNode(tx *engram.Tx, v int) *Node { // want newNode:"result\\(0:fresh\\)"
	n, _ := engram.New[Node](tx)
	return n
}

func useNew(tx *engram.Tx, l *List) {
	n := newNode(tx, 1)
	n.Val = 2
	n.Next = nil
}

// A helper that logs before it stores.
func setValLogged(tx *engram.Tx, n *Node, v int) { // want setValLogged:"logs\\(1:1 steps\\)"
	_ = tx.Log(&n.Val)
	n.Val = v
}

func useLogged(tx *engram.Tx, l *List) { // want useLogged:"logs\\(1:3 steps\\)"
	setValLogged(tx, l.Head, 3)
}

// A range copy logged exactly.
func copyRange(tx *engram.Tx, n *Node, i, j int, src []int) {
	items := n.Items
	_ = engram.LogSlice(tx, items[i:j])
	copy(items[i:j], src)
}

// A string copied into the pool, stored into a logged field.
func rename(tx *engram.Tx, n *Node, s string) error {
	ps, err := engram.String(tx, s)
	if err != nil {
		return err
	}
	if err := tx.Log(&n.Name); err != nil {
		return err
	}
	n.Name = ps
	return nil
}

// A captured local variable is volatile.
func counter(pool *engram.Pool) int {
	count := 0
	_ = pool.Txn(func(tx *engram.Tx) error {
		count++
		return nil
	})
	return count
}

// Logged on every path, by a different log on each branch.
func bothBranches(tx *engram.Tx, n *Node, c bool) {
	if c {
		_ = tx.Log(n)
	} else {
		_ = tx.Log(&n.Val)
	}
	n.Val = 1
}

// Known false positive 1: logged on every path that reaches the store, but
// through a loop whose first iteration the analyzer cannot see is skipped
// (the loop runs at least once since k > 0 is checked first).
func loopLogged(tx *engram.Tx, n *Node, k int) {
	if k <= 0 {
		return
	}
	for i := 0; i < k; i++ {
		_ = tx.Log(n)
	}
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
}

// The log is made by a helper on every path.
func logNode(tx *engram.Tx, n *Node) { // want logNode:"logs\\(1:0 steps\\)"
	_ = tx.Log(n)
}

func logThenSet(tx *engram.Tx, n *Node) { // want logThenSet:"logs\\(1:0 steps\\)"
	logNode(tx, n)
	n.Val = 1
}

// Known false positive 2: the helper logs on one path only (the caller
// cannot tell which), so its log does not count.
func maybeLog(tx *engram.Tx, n *Node) error {
	if n == nil {
		return nil
	}
	return tx.Log(n)
}

func maybeLogThenSet(tx *engram.Tx, n *Node) {
	_ = maybeLog(tx, n)
	n.Val = 1 // want `unlogged store to pool memory: n.Val`
}

// Known false positive 3: a pointer parameter of a function that opens a
// transaction is taken to be pool memory, even when the caller passes a
// volatile object.
func update(pool *engram.Pool, n *Node) error {
	return pool.Txn(func(tx *engram.Tx) error {
		n.Val = 1 // want `unlogged store to pool memory: n.Val`
		return nil
	})
}

func callUpdate(pool *engram.Pool) error {
	return update(pool, &Node{})
}

// A helper taking the transaction, given a volatile scratch buffer: it is
// checked at its calls, where the buffer is seen to be volatile.
func collect(tx *engram.Tx, l *List, out *[]int) { // want collect:"store\\(2:\\*out\\)"
	for n := l.Head; n != nil; n = n.Next {
		*out = append(*out, n.Val)
	}
}

func callCollect(tx *engram.Tx, l *List) int {
	var vals []int
	collect(tx, l, &vals)
	return len(vals)
}

// A constructor helper given a fresh node.
func initNode(tx *engram.Tx, n *Node, v int) { // want initNode:"store\\(1:n.Val\\) store\\(1:n.Next\\)"
	n.Val = v
	n.Next = nil
}

func construct(tx *engram.Tx) (*Node, error) { // want construct:"result\\(0:volatile\\|fresh\\)"
	n, err := engram.New[Node](tx)
	if err != nil {
		return nil, err
	}
	initNode(tx, n, 7)
	return n, nil
}

// Known false positive 4: an exported function taking the transaction is
// checked on its own, its pointer parameters taken to be pool memory, even
// when every caller passes a volatile scratch buffer.
func Collect(tx *engram.Tx, l *List, out *[]int) {
	for n := l.Head; n != nil; n = n.Next {
		*out = append(*out, n.Val) // want `unlogged store to pool memory: \*out`
	}
}

func callExported(tx *engram.Tx, l *List) int {
	var vals []int
	Collect(tx, l, &vals)
	return len(vals)
}

// The pointer changes before the log through it: the log covers the new
// object.
func relinkThenLog(tx *engram.Tx, l *List, m *Node) { // want relinkThenLog:"logs\\(1:1 steps\\) logs\\(1:3 steps\\)"
	_ = tx.Log(&l.Head)
	l.Head = m
	_ = tx.Log(&l.Head.Val)
	l.Head.Val = 1
}

type Holder struct{ A []int }

// A holder and its slice allocated in the transaction, then filled: all of
// it is fresh (go-pmem's sps benchmark does this).
func allocAndFill(pool *engram.Pool, n int) error {
	var h *Holder
	return pool.Txn(func(tx *engram.Tx) (err error) {
		if h, err = engram.New[Holder](tx); err != nil {
			return err
		}
		if h.A, err = engram.Make[int](tx, n, n); err != nil {
			return err
		}
		for i := range h.A {
			h.A[i] = i
		}
		return engram.SetRoot(tx, "array", h)
	})
}

type Bank struct {
	Accounts []int64
	Kids     [2]*Node
	Items    []int
}

// Indexes captured by the transaction's closure: each load of from is the
// same value.
func transfer(pool *engram.Pool, b *Bank, from, to int) error {
	return pool.Txn(func(tx *engram.Tx) error {
		if err := engram.LogSlice(tx, b.Accounts[from:from+1]); err != nil {
			return err
		}
		if err := tx.Log(&b.Accounts[to]); err != nil {
			return err
		}
		b.Accounts[from] -= 10
		b.Accounts[to] += 10
		return nil
	})
}

// A fresh object filled by copy and given fresh children.
func freshRecord(tx *engram.Tx) (*Bank, error) { // want freshRecord:"result\\(0:volatile\\|fresh\\)"
	r, err := engram.New[Bank](tx)
	if err != nil {
		return nil, err
	}
	if r.Items, err = engram.Make[int](tx, 3, 8); err != nil {
		return nil, err
	}
	copy(r.Items, []int{10, 20, 30})
	if r.Kids[1], err = engram.New[Node](tx); err != nil {
		return nil, err
	}
	r.Kids[1].Val = 5
	return r, nil
}

// A counted loop over the logged range.
func clearRange(tx *engram.Tx, b *Bank, lo, hi int) {
	acc := b.Accounts
	_ = engram.LogSlice(tx, acc[lo:hi])
	for k := lo; k < hi; k++ {
		acc[k] = 0
	}
}

// A store left unlogged on purpose, with the directive that says so.
func seededForExplorer(tx *engram.Tx, n *Node) {
	//engramvet:ignore the crash explorer must catch this one
	n.Val = 1
	n.Next = nil //engramvet:ignore also on the same line
}

func ignoredInHelper(n *Node) {
	n.Val = 2 //engramvet:ignore deliberately unlogged
}

func callIgnored(tx *engram.Tx, l *List) {
	ignoredInHelper(l.Head)
}

// Local buffers handed to functions outside the module.
func localBuffers(tx *engram.Tx, n *Node) string {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(n.Val))
	parts := []string{"a", "b"}
	sort.Strings(parts)
	return strings.Join(parts, string(buf[:]))
}

// Two fields added to a batch, the batch logged, both stored.
func batched(tx *engram.Tx, l *List, n *Node) error { // want batched:"logs\\(1:1 steps\\) logs\\(1:1 steps\\)"
	var b engram.LogBatch
	engram.BatchLog(tx, &b, &l.Head)
	engram.BatchLog(tx, &b, &l.Len)
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	l.Head, l.Len = n, l.Len+1
	return nil
}

// A helper logging through its own batch counts as a log at its call.
func logHeadLen(tx *engram.Tx, l *List) error { // want logHeadLen:"logs\\(1:1 steps\\) logs\\(1:1 steps\\)"
	var b engram.LogBatch
	engram.BatchLog(tx, &b, &l.Head)
	engram.BatchLog(tx, &b, &l.Len)
	return tx.LogBatch(&b)
}

func batchedByHelper(tx *engram.Tx, l *List) { // want batchedByHelper:"logs\\(1:1 steps\\) logs\\(1:1 steps\\)"
	if logHeadLen(tx, l) != nil {
		return
	}
	l.Len = 0
}

// A helper adding to the caller's batch, logged by the caller.
func addHead(tx *engram.Tx, b *engram.LogBatch, l *List) { // want addHead:"batches\\(2:1 steps into 1\\)"
	engram.BatchLog(tx, b, &l.Head)
}

func batchedInHelper(tx *engram.Tx, l *List) { // want batchedInHelper:"logs\\(1:1 steps\\)"
	var b engram.LogBatch
	addHead(tx, &b, l)
	engram.BatchLogSlice(tx, &b, l.Head.Items)
	if tx.LogBatch(&b) != nil {
		return
	}
	l.Head.Items[2] = 1
	l.Head = nil
}

// A server's own state (a struct with a map: the pool cannot hold it) and
// a reply buffer inside it, written by a method taking the transaction.
type server struct {
	root  *List
	names map[string]int
	hits  int
	stats struct{ cmds int }
	out   Writer
}

// Writer is exported: another package may allocate it in the pool.
type Writer struct{ b []byte }

func (w *Writer) put(s string) { w.b = append(w.b, s...) } // want put:"store\\(0:w.b\\)"

func (s *server) handle(tx *engram.Tx, keys []*server) {
	s.hits++
	s.stats.cmds++
	s.out.put("+OK")
	s.names = nil
	keys[0] = s
	copy(keys, keys[1:])
}

// A scratch type of this package that nothing allocates in the pool.
type scratch struct {
	n    int
	refs []*Node
}

func (s *scratch) reset(tx *engram.Tx, l *List) {
	s.n = 0
	s.refs = append(s.refs[:0], l.Head)
}

// Read-only standard functions given pool memory: bytes' functions, and
// runtime/metrics reading into a local.
type Entry struct{ Key []byte }

func sameKey(tx *engram.Tx, e *Entry, k []byte) bool {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	_ = s[0].Value.Kind()
	return bytes.Equal(e.Key, k) || bytes.Compare(e.Key, k) < 0 || bytes.HasPrefix(e.Key, k)
}

// A helper calling the function it is given: the closure passed is checked
// at the call.
type Dict struct{ Items []*Node }

func (d *Dict) each(fn func(n *Node) bool) { // want each:"undecided\\(-1:call of a function value \\(fn\\) may store to pool memory\\)"
	for _, n := range d.Items {
		if !fn(n) {
			return
		}
	}
}

func sumAll(d *Dict) int {
	total := 0
	d.each(func(n *Node) bool { total += n.Val; return true })
	return total
}

func countAll(tx *engram.Tx, d *Dict) int {
	return sumAll(d) + len(d.Items)
}

// A local closure counting into a local, called inside the transaction.
func localCounter(pool *engram.Pool, l *List) (int, error) {
	seen := 0
	count := func(n *Node) { seen += n.Val }
	err := pool.Txn(func(tx *engram.Tx) error {
		count(l.Head)
		return nil
	})
	return seen, err
}

// Fresh nodes kept in a local slice made with make, set afterwards.
func freshInLocalSlice(tx *engram.Tx, k int) error {
	ns := make([]*Node, k)
	for i := range ns {
		n, err := engram.New[Node](tx)
		if err != nil {
			return err
		}
		ns[i] = n
	}
	for _, n := range ns {
		n.Val = 1
	}
	return nil
}

// A reply buffer the program keeps on the Go heap, said so.
//
//engramvet:volatile reply buffers are Go heap memory, never allocated in the pool
type Reply struct{ b []byte } // want Reply:"volatile"

func (r *Reply) add(s string) { r.b = append(r.b, s...) }

func (r *Reply) handle(tx *engram.Tx, l *List) {
	r.add("+OK")
	r.b = r.b[:0]
}

// Operations taking the transaction, called as values, and a generator.
func runLogged(tx *engram.Tx, n *Node, op func(*engram.Tx, *Node) error) error {
	r := rand.New(rand.NewPCG(1, 2))
	if r.IntN(2) == 0 {
		return nil
	}
	return op(tx, n)
}
