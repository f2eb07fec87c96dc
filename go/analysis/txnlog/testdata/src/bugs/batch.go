package bugs

import (
	"lib"

	"github.com/engram-pm/engram-go"
)

// Log batches (engram.BatchLog, BatchLogSlice, tx.LogBatch): a range added
// to a batch is logged only when the batch is.

// Added to a batch that is never logged.
func batchNeverLogged(tx *engram.Tx, l *List) {
	var b engram.LogBatch
	engram.BatchLog(tx, &b, &l.Len)
	l.Len = 0 // want `unlogged store to pool memory: l.Len`
}

// Added after the batch was logged.
func batchAddedLate(tx *engram.Tx, l *List) {
	var b engram.LogBatch
	_ = tx.LogBatch(&b)
	engram.BatchLog(tx, &b, &l.Len)
	l.Len = 0 // want `unlogged store to pool memory: l.Len`
}

// Added to one batch, another logged.
func batchOther(tx *engram.Tx, l *List) {
	var b, c engram.LogBatch
	engram.BatchLog(tx, &b, &l.Len)
	_ = tx.LogBatch(&c)
	l.Len = 0 // want `unlogged store to pool memory: l.Len`
}

// Added on one branch only.
func batchOneBranch(tx *engram.Tx, l *List, c bool) {
	var b engram.LogBatch
	if c {
		engram.BatchLog(tx, &b, &l.Len)
	}
	_ = tx.LogBatch(&b)
	l.Len = 0 // want `unlogged store to pool memory: l.Len`
}

// A helper adds to the caller's batch, which the caller never logs.
func addLen(tx *engram.Tx, b *engram.LogBatch, l *List) { // want addLen:"batches\\(2:1 steps into 1\\)"
	engram.BatchLog(tx, b, &l.Len)
}

func batchHelperNotLogged(tx *engram.Tx, l *List) {
	var b engram.LogBatch
	addLen(tx, &b, l)
	l.Len = 0 // want `unlogged store to pool memory: l.Len`
}

// The batch holds the old head's field: the head changes before the store.
func batchRelinked(tx *engram.Tx, l *List, m *Node) { // want batchRelinked:"logs\\(1:1 steps\\)"
	var b engram.LogBatch
	_ = tx.Log(&l.Head)
	engram.BatchLog(tx, &b, &l.Head.Val)
	l.Head = m
	_ = tx.LogBatch(&b)
	l.Head.Val = 1 // want `unlogged store to pool memory: l.Head.Val`
}

// A batch of one field, another stored.
func batchWrongField(tx *engram.Tx, l *List) { // want batchWrongField:"logs\\(1:1 steps\\)"
	var b engram.LogBatch
	engram.BatchLog(tx, &b, &l.Head)
	_ = tx.LogBatch(&b)
	l.Len = 0 // want `unlogged store to pool memory: l.Len`
}

// Pool memory reached through server state the pool cannot hold.
type server struct {
	root  *List
	names map[string]int
	hits  int
}

func (s *server) handle(tx *engram.Tx) {
	s.hits++
	s.root.Len = 0 // want `unlogged store to pool memory: s.root.Len`
}

// Unexported types the package allocates in the pool, directly, inside
// another, or through a generic helper.
type record struct{ v int }

type inner struct{ v int }

type outer struct{ in inner }

type gen struct{ v int }

func alloc[T any](tx *engram.Tx) *T { // want alloc:"result\\(0:fresh\\)"
	p, _ := engram.New[T](tx)
	return p
}

func allocAll(tx *engram.Tx) {
	_, _ = engram.New[record](tx)
	_, _ = engram.New[outer](tx)
	_ = alloc[gen](tx)
}

func (r *record) set(tx *engram.Tx) {
	r.v = 1 // want `unlogged store to pool memory: r.v`
}

func (i *inner) set(tx *engram.Tx) {
	i.v = 1 // want `unlogged store to pool memory: i.v`
}

func (g *gen) set(tx *engram.Tx) {
	g.v = 1 // want `unlogged store to pool memory: g.v`
}

// A helper calling the function it is given, given one that stores.
type Dict struct{ Items []*Node }

func (d *Dict) each(fn func(n *Node)) { // want each:"undecided\\(-1:call of a function value \\(fn\\) may store to pool memory\\)"
	for _, n := range d.Items {
		fn(n)
	}
}

func bumpAll(d *Dict, l *List) { // want bumpAll:"store\\(-1:n.Val\\) store\\(1:l.Len\\)"
	d.each(func(n *Node) { n.Val++ })
	d.each(func(*Node) { l.Len++ })
}

func bumpInTx(tx *engram.Tx, d *Dict, l *List) {
	bumpAll(d, l) // want `unlogged store to pool memory in call to bumpAll: n.Val` `unlogged store to pool memory in call to bumpAll: l.Len`
}

// A local closure called inside the transaction, and one a helper's own
// closure calls.
func localClosure(pool *engram.Pool, l *List) error {
	set := func(n *Node) { n.Val = 1 }
	return pool.Txn(func(tx *engram.Tx) error {
		set(l.Head) // want `unlogged store to pool memory in call to func literal in localClosure: n.Val`
		return nil
	})
}

func (d *Dict) visit(fn func(n *Node)) { // want visit:"undecided\\(-1:call of a function value may store to pool memory\\)"
	walk := func() {
		for _, n := range d.Items {
			fn(n)
		}
	}
	walk()
}

func visitBump(d *Dict) { // want visitBump:"store\\(-1:n.Val\\)"
	d.visit(func(n *Node) { n.Val = 2 })
}

func visitInTx(tx *engram.Tx, d *Dict) {
	visitBump(d) // want `unlogged store to pool memory in call to visitBump: n.Val`
}

// Pool nodes kept in a local slice made with make.
func poolInLocalSlice(tx *engram.Tx, l *List) {
	ns := make([]*Node, 1)
	ns[0] = l.Head
	for _, n := range ns {
		n.Val = 1 // want `unlogged store to pool memory: n.Val`
	}
}

// A type said to be Go heap memory, allocated in the pool.
//
//engramvet:volatile (wrongly)
type scratchBuf struct{ b []byte } // want scratchBuf:"volatile"

type holdsBuf struct{ s scratchBuf }

func allocBuf(tx *engram.Tx) {
	_, _ = engram.New[scratchBuf](tx) // want `scratchBuf is marked //engramvet:volatile but New\[...\] may allocate it in the pool`
	_ = alloc[holdsBuf](tx)           // want `scratchBuf is marked //engramvet:volatile but alloc\[...\] may allocate it in the pool`
}

// A type another package marks volatile, allocated here.
func allocLibBuf(tx *engram.Tx) {
	_, _ = engram.New[lib.Buf](tx) // want `Buf is marked //engramvet:volatile but New\[...\] may allocate it in the pool`
}

// Operations taking the transaction, called as values: each is checked on
// its own.
var ops = []func(tx *engram.Tx, n *Node){
	func(tx *engram.Tx, n *Node) {
		n.Val = 3 // want `unlogged store to pool memory: n.Val`
	},
}

func runOps(tx *engram.Tx, n *Node) {
	for _, op := range ops {
		op(tx, n)
	}
}

// A local closure writing pool memory it captured, called in the
// transaction (directly, and from a nested closure).
func capturedPool(pool *engram.Pool, l *List) error {
	h := l.Head
	bump := func() { h.Val++ }
	return pool.Txn(func(tx *engram.Tx) error {
		bump() // want `unlogged store to pool memory in call to func literal in capturedPool: h.Val`
		nested := func() {
			bump()
		}
		nested() // want `unlogged store to pool memory in call to func literal in capturedPool\$2: h.Val`
		return nil
	})
}
