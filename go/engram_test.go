package engram

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

type node struct {
	Value uint64
	Next  *node
}

type record struct {
	Name  string
	Data  []byte
	Items []uint32
	Kids  [2]*node
	Inner struct{ A, B int64 }
}

func tmpPool(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(t.TempDir(), name)
}

var processOpts = &Options{Layout: "test", Durability: Process}

func mustOpen(t *testing.T, path string, opts *Options) (*Pool, bool) {
	t.Helper()
	p, first, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return p, first
}

func buildList(t *testing.T, p *Pool, n int) {
	t.Helper()
	err := p.Txn(func(tx *Tx) error {
		var head *node
		for i := 1; i <= n; i++ {
			x, err := New[node](tx)
			if err != nil {
				return err
			}
			x.Value, x.Next = uint64(i), head
			head = x
		}
		return SetRoot(tx, "list", head)
	})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
}

// listNodes builds buildList's list of n and returns its nodes in order.
func listNodes(t *testing.T, p *Pool, n int) []*node {
	t.Helper()
	buildList(t, p, n)
	head, _ := Root[node](p, "list")
	var nodes []*node
	for x := head; x != nil; x = x.Next {
		nodes = append(nodes, x)
	}
	return nodes
}

func sum(t *testing.T, p *Pool) uint64 {
	t.Helper()
	head, err := Root[node](p, "list")
	if err != nil {
		t.Fatalf("Root: %v", err)
	}
	var s uint64
	for x := head; x != nil; x = x.Next {
		s += x.Value
	}
	return s
}

func TestListSurvivesReopen(t *testing.T) {
	path := tmpPool(t, "list.pool")
	p, first := mustOpen(t, path, processOpts)
	if !first {
		t.Fatal("first run not reported")
	}
	buildList(t, p, 10)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, first = mustOpen(t, path, processOpts)
	defer p.Close()
	if first {
		t.Fatal("second open reported as first run")
	}
	if got := sum(t, p); got != 55 {
		t.Fatalf("sum %d, want 55", got)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestErrorAndPanicRollBack(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "rb.pool"), processOpts)
	defer p.Close()
	buildList(t, p, 3)
	head, _ := Root[node](p, "list")
	boom := errors.New("boom")
	err := p.Txn(func(tx *Tx) error {
		if err := tx.Log(&head.Value); err != nil {
			return err
		}
		head.Value = 100
		return boom
	})
	if !errors.Is(err, boom) || head.Value != 3 {
		t.Fatalf("err %v, value %d", err, head.Value)
	}
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("panic not re-raised: %v", r)
			}
		}()
		_ = p.Txn(func(tx *Tx) error {
			if err := tx.Log(head); err != nil {
				return err
			}
			head.Value = 200
			panic("kaboom")
		})
	}()
	if head.Value != 3 {
		t.Fatalf("panic did not roll back: %d", head.Value)
	}
}

// A Tx answers a Log of a range it logged recently without the engine
// (tx.recent); a wider range, and the same field in the next region, must
// still be logged: the rollbacks restore every byte.
func TestRecentLogsStillUndo(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "recent.pool"), processOpts)
	defer p.Close()
	nodes := listNodes(t, p, 12)
	head := nodes[0]
	boom := errors.New("boom")
	for round := 0; round < 2; round++ {
		err := p.Txn(func(tx *Tx) error {
			for i, n := range nodes { // more ranges than the Tx remembers
				for _, f := range []any{&n.Value, &n.Value, n, &n.Next} {
					if err := tx.Log(f); err != nil {
						return err
					}
				}
				n.Value, n.Next = uint64(1000+i), nil //engramvet:ignore logged just above through the []any of their addresses
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("round %d: %v", round, err)
		}
		i := 0
		for n := head; n != nil; n = n.Next {
			if n.Value != uint64(12-i) {
				t.Fatalf("round %d: node %d holds %d after the rollback", round, i, n.Value)
			}
			i++
		}
		if i != 12 {
			t.Fatalf("round %d: %d nodes after the rollback", round, i)
		}
	}
}

// rollbackThenCommit runs write (which stores base+i into node i) in a
// region that then fails: every node of buildList's list must hold its
// old value (40-i) after the rollback; then in one that commits: every
// node holds 2000+i.
func rollbackThenCommit(t *testing.T, p *Pool, nodes []*node, write func(tx *Tx, base uint64) error) {
	t.Helper()
	boom := errors.New("boom")
	if err := p.Txn(func(tx *Tx) error {
		if err := write(tx, 1000); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if n.Value != uint64(40-i) {
			t.Fatalf("node %d holds %d after the rollback", i, n.Value)
		}
	}
	if err := p.Txn(func(tx *Tx) error { return write(tx, 2000) }); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if n.Value != uint64(2000+i) {
			t.Fatalf("node %d holds %d after the commit", i, n.Value)
		}
	}
}

// A LogBatch logs its ranges with one engine call: more ranges than one
// call takes (logBatchMax) and than the Tx remembers, a field and its
// whole node, a range logged twice; a rollback restores every byte, a
// commit keeps the stores, and a Go-heap pointer fails at LogBatch.
func TestLogBatch(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "batch.pool"), processOpts)
	defer p.Close()
	nodes := listNodes(t, p, 40)
	write := func(tx *Tx, base uint64) error {
		var b LogBatch
		for _, n := range nodes {
			BatchLog(tx, &b, &n.Value)
			BatchLog(tx, &b, n)
			BatchLog(tx, &b, &n.Value)
		}
		if err := tx.LogBatch(&b); err != nil {
			return err
		}
		for i, n := range nodes {
			n.Value = base + uint64(i) //engramvet:ignore batch-logged by the loop above over the same nodes
		}
		return nil
	}
	rollbackThenCommit(t, p, nodes, write)
	var x uint64
	if err := p.Txn(func(tx *Tx) error {
		var b LogBatch
		BatchLog(tx, &b, &x)
		return tx.LogBatch(&b)
	}); !errors.Is(err, ErrBadPointer) {
		t.Fatalf("a Go-heap range: %v", err)
	}
}

// LogRanges logs its ranges ahead with one engine call: a store with no
// Log after it is undone by a rollback, a Log after it (answered by the
// Tx) and its store too, a commit keeps the stores; odd pairs and a
// Go-heap range fail, and a failed call leaves nothing remembered.
func TestLogRanges(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "ranges.pool"), processOpts)
	defer p.Close()
	nodes := listNodes(t, p, 40)
	var pairs []uint64
	for _, n := range nodes {
		pairs = append(pairs, uint64(uintptr(unsafe.Pointer(n))), uint64(unsafe.Sizeof(*n)))
	}
	write := func(tx *Tx, base uint64) error {
		if err := tx.LogRanges(pairs); err != nil {
			return err
		}
		for i, n := range nodes {
			if i%2 == 0 {
				if err := tx.Log(&n.Value); err != nil {
					return err
				}
			}
			n.Value = base + uint64(i) //engramvet:ignore logged ahead by LogRanges(pairs), every node (the test's point)
		}
		return nil
	}
	rollbackThenCommit(t, p, nodes, write)
	var x uint64
	err := p.Txn(func(tx *Tx) error {
		if err := tx.LogRanges(pairs[:3]); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("odd pairs: %v", err)
		}
		bad := []uint64{uint64(uintptr(unsafe.Pointer(&x))), 8}
		if err := tx.LogRanges(bad); !errors.Is(err, ErrBadPointer) {
			t.Errorf("a Go-heap range: %v", err)
		}
		if tx.ahead.covers(uintptr(unsafe.Pointer(&x)), uintptr(unsafe.Pointer(&x))+8) {
			t.Error("a range of a failed LogRanges is remembered")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLogRangesTableReused: a region's log-ahead table goes to the next
// region emptied (Pool.spareAhead). A range the last region logged ahead
// must not answer a Log in the next one: there the engine has not logged
// it, and a store after that Log would survive the rollback.
func TestLogRangesTableReused(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "reused.pool"), processOpts)
	defer p.Close()
	nodes := listNodes(t, p, 2)
	a, b := nodes[0], nodes[1]
	pair := func(n *node) []uint64 {
		return []uint64{uint64(uintptr(unsafe.Pointer(n))), uint64(unsafe.Sizeof(*n))}
	}
	if err := p.Txn(func(tx *Tx) error { return tx.LogRanges(pair(a)) }); err != nil {
		t.Fatal(err)
	}
	before := a.Value
	stop := errors.New("roll back")
	err := p.Txn(func(tx *Tx) error {
		if err := tx.LogRanges(pair(b)); err != nil { // takes the first region's table
			return err
		}
		if err := tx.Log(a); err != nil {
			return err
		}
		a.Value = before + 1000
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatal(err)
	}
	if a.Value != before {
		t.Fatalf("node 0 holds %d after the rollback, want %d: the last region's range answered the Log", a.Value, before)
	}
}

func TestNestingFlattened(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "nest.pool"), processOpts)
	defer p.Close()
	buildList(t, p, 2)
	head, _ := Root[node](p, "list")
	inner := errors.New("inner")
	err := p.Txn(func(tx *Tx) error {
		if err := tx.Log(&head.Value); err != nil {
			return err
		}
		head.Value = 7
		if err := p.Txn(func(tx2 *Tx) error {
			if tx2 != tx {
				t.Error("nested Txn got another Tx")
			}
			return inner
		}); !errors.Is(err, inner) {
			t.Errorf("inner error %v", err)
		}
		return nil
	})
	if !errors.Is(err, ErrAborted) || head.Value != 2 {
		t.Fatalf("err %v, value %d", err, head.Value)
	}
	err = p.Txn(func(tx *Tx) error {
		return p.Txn(func(tx *Tx) error {
			if err := tx.Log(&head.Value); err != nil {
				return err
			}
			head.Value = 9
			return nil
		})
	})
	if err != nil || head.Value != 9 {
		t.Fatalf("nested commit: %v, %d", err, head.Value)
	}
}

// TestEpoch: Tx.Epoch stays while regions commit, changes when one rolls
// back (an error, an inner Txn's error that dooms the outer one), and a
// pool opened again starts at another value.
func TestEpoch(t *testing.T) {
	path := tmpPool(t, "epoch.pool")
	p, _ := mustOpen(t, path, processOpts)
	epoch := func() uint64 {
		t.Helper()
		var e uint64
		if err := p.Txn(func(tx *Tx) error { e = tx.Epoch(); return nil }); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e0 := epoch()
	if e := epoch(); e != e0 {
		t.Fatalf("a committed region changed the epoch: %d -> %d", e0, e)
	}
	boom := errors.New("boom")
	var inside uint64
	if err := p.Txn(func(tx *Tx) error { inside = tx.Epoch(); return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	e1 := epoch()
	if inside != e0 || e1 == e0 {
		t.Fatalf("epoch %d in the region, %d after its rollback, %d before", inside, e1, e0)
	}
	err := p.Txn(func(tx *Tx) error {
		_ = p.Txn(func(*Tx) error { return boom })
		return nil
	})
	if !errors.Is(err, ErrAborted) {
		t.Fatalf("outer region: %v", err)
	}
	if e := epoch(); e == e1 {
		t.Fatal("an inner Txn's error rolled the region back and left the epoch")
	}
	e2 := epoch()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, _ = mustOpen(t, path, processOpts)
	defer p.Close()
	if e := epoch(); e == e2 || e == e1 || e == e0 {
		t.Fatalf("the reopened pool's epoch %d is one of the last open's", e)
	}
}

// TestObjectCount: a New object counts 1, a Make array its capacity, and
// a pointer into an object (not its start) is ErrBadPointer.
func TestObjectCount(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "count.pool"), processOpts)
	defer p.Close()
	err := p.Txn(func(tx *Tx) error {
		n, err := New[node](tx)
		if err != nil {
			return err
		}
		s, err := Make[uint64](tx, 3, 7)
		if err != nil {
			return err
		}
		if k, err := p.ObjectCount(unsafe.Pointer(n)); err != nil || k != 1 {
			t.Errorf("New: %d, %v; want 1", k, err)
		}
		if k, err := p.ObjectCount(unsafe.Pointer(&s[0])); err != nil || k != 7 {
			t.Errorf("Make(3, 7): %d, %v; want 7", k, err)
		}
		if _, err := p.ObjectCount(unsafe.Pointer(&s[1])); !errors.Is(err, ErrBadPointer) {
			t.Errorf("interior pointer: %v, want ErrBadPointer", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSlicesStringsBytes(t *testing.T) {
	path := tmpPool(t, "rec.pool")
	p, _ := mustOpen(t, path, processOpts)
	err := p.Txn(func(tx *Tx) error {
		r, err := New[record](tx)
		if err != nil {
			return err
		}
		if r.Name, err = String(tx, "hello, pool"); err != nil {
			return err
		}
		if r.Data, err = Bytes(tx, []byte{1, 2, 3}); err != nil {
			return err
		}
		if r.Items, err = Make[uint32](tx, 3, 8); err != nil {
			return err
		}
		copy(r.Items, []uint32{10, 20, 30})
		if r.Kids[1], err = New[node](tx); err != nil {
			return err
		}
		r.Kids[1].Value = 5
		r.Inner.B = -1
		return SetRoot(tx, "rec", r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, _ = mustOpen(t, path, processOpts)
	defer p.Close()
	if err := p.Collect(); err != nil {
		t.Fatal(err)
	}
	r, err := Root[record](p, "rec")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "hello, pool" || string(r.Data) != "\x01\x02\x03" || len(r.Items) != 3 || cap(r.Items) != 8 ||
		r.Items[2] != 30 || r.Kids[0] != nil || r.Kids[1].Value != 5 || r.Inner.B != -1 {
		t.Fatalf("record after reopen and GC: %+v", *r)
	}
	err = p.Txn(func(tx *Tx) error {
		if err := LogSlice(tx, r.Items[1:2]); err != nil {
			return err
		}
		r.Items[1] = 21
		return nil
	})
	if err != nil || r.Items[1] != 21 {
		t.Fatalf("LogSlice: %v", err)
	}
	roots, err := p.Roots()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ri := range roots {
		found = found || (ri.Name == "rec" && strings.HasSuffix(ri.Type, ".record"))
	}
	if !found {
		t.Fatalf("roots: %+v", roots)
	}
	if err := p.Txn(func(tx *Tx) error { return DeleteRoot(tx, "rec") }); err != nil {
		t.Fatal(err)
	}
	if _, err := Root[record](p, "rec"); !errors.Is(err, ErrNoRoot) {
		t.Fatalf("deleted root: %v", err)
	}
	if _, err := Root[node](p, "list"); !errors.Is(err, ErrNoRoot) {
		t.Fatalf("missing root: %v", err)
	}
}

type badMap struct {
	OK int
	M  map[string]int
}
type badIface struct{ In struct{ X any } }
type badChan struct{ C [2]chan int }

func TestUnsupportedTypesNameTheField(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "bad.pool"), processOpts)
	defer p.Close()
	check := func(field string, f func(tx *Tx) error) {
		err := p.Txn(f)
		if !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), field) {
			t.Errorf("want ErrUnsupportedType naming %s, got %v", field, err)
		}
	}
	check("badMap.M", func(tx *Tx) error { _, err := New[badMap](tx); return err })
	check("badIface.In.X", func(tx *Tx) error { _, err := New[badIface](tx); return err })
	check("badChan.C[0]", func(tx *Tx) error { _, err := Make[badChan](tx, 1, 1); return err })
}

func TestChangedStructNamesTheField(t *testing.T) {
	path := tmpPool(t, "changed.pool")
	p, _ := mustOpen(t, path, processOpts)
	{
		type Account struct {
			ID      uint64
			Balance int64
		}
		if err := p.Txn(func(tx *Tx) error {
			a, err := New[Account](tx)
			if err != nil {
				return err
			}
			return SetRoot(tx, "acct", a)
		}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	p, _ = mustOpen(t, path, processOpts)
	defer p.Close()
	type Account struct {
		ID      uint64
		Balance float64
	}
	_, err := Root[Account](p, "acct")
	t.Log(err)
	if !errors.Is(err, ErrLayoutMismatch) || !strings.Contains(err.Error(), "Balance") || !strings.Contains(err.Error(), "Account") {
		t.Fatalf("want ErrLayoutMismatch naming Account and Balance, got %v", err)
	}
	if _, err := Root[node](p, "acct"); !errors.Is(err, ErrRootType) {
		t.Fatalf("want ErrRootType, got %v", err)
	}
}

type holder struct {
	P    *node
	Name string
}

func TestCheckedModeFindsGoHeapPointers(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "checked.pool"), processOpts)
	defer p.Close()
	goHeap := &node{Value: 1}
	name := strings.Repeat("x", 3)
	err := p.Txn(func(tx *Tx) error {
		h, err := New[holder](tx)
		if err != nil {
			return err
		}
		h.P = goHeap
		return SetRoot(tx, "h", h)
	})
	if !errors.Is(err, ErrVolatilePointer) || !strings.Contains(err.Error(), "holder.P") {
		t.Fatalf("want ErrVolatilePointer naming holder.P, got %v", err)
	}
	if _, err := Root[holder](p, "h"); !errors.Is(err, ErrNoRoot) {
		t.Fatalf("the failed transaction was not rolled back: %v", err)
	}
	err = p.Txn(func(tx *Tx) error {
		h, err := New[holder](tx)
		if err == nil {
			h.Name = name // a Go string: its bytes are on the Go heap
		}
		return err
	})
	if !errors.Is(err, ErrVolatilePointer) || !strings.Contains(err.Error(), "holder.Name") {
		t.Fatalf("want ErrVolatilePointer naming holder.Name, got %v", err)
	}
	err = p.Txn(func(tx *Tx) error {
		s, err := Make[uint64](tx, 4, 4)
		if err != nil {
			return err
		}
		h, err := New[holder](tx)
		if err == nil {
			h.P = (*node)(ptr(uintptr(ptr2(&s[2]))))
		}
		return err
	})
	if !errors.Is(err, ErrVolatilePointer) || !strings.Contains(err.Error(), "start of a pool object") {
		t.Fatalf("want an interior-pointer error, got %v", err)
	}
	if err := p.Txn(func(tx *Tx) error { return SetRoot(tx, "x", goHeap) }); !errors.Is(err, ErrVolatilePointer) {
		t.Fatalf("SetRoot of a Go-heap pointer: %v", err)
	}
}

func TestTxUsedAfterItsRegion(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "ended.pool"), processOpts)
	defer p.Close()
	var kept *Tx
	if err := p.Txn(func(tx *Tx) error { kept = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := New[node](kept); !errors.Is(err, ErrTxEnded) {
		t.Fatalf("New on an ended Tx: %v", err)
	}
	var x node
	if err := kept.Log(&x); !errors.Is(err, ErrTxEnded) {
		t.Fatalf("Log on an ended Tx: %v", err)
	}
	if err := SetRoot(kept, "r", &x); !errors.Is(err, ErrTxEnded) {
		t.Fatalf("SetRoot on an ended Tx: %v", err)
	}
	if err := p.Txn(func(tx *Tx) error { return tx.Log(&x) }); !errors.Is(err, ErrBadPointer) {
		t.Fatalf("Log of Go-heap memory: %v", err)
	}
}

func TestClosedPool(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "closed.pool"), processOpts)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.Txn(func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Txn on a closed pool: %v", err)
	}
	if err := p.Collect(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Collect on a closed pool: %v", err)
	}
	if _, err := Root[node](p, "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Root on a closed pool: %v", err)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.pool")
	os.WriteFile(foreign, make([]byte, 65536), 0o644)
	if _, _, err := Open(foreign, processOpts); !errors.Is(err, ErrNotAPool) {
		t.Fatalf("foreign file: %v", err)
	}
	path := filepath.Join(dir, "p.pool")
	p, _ := mustOpen(t, path, processOpts)
	if _, err := Create(path, processOpts); !errors.Is(err, ErrExists) {
		t.Fatalf("Create over a pool: %v", err)
	}
	if _, _, err := Open(path, processOpts); !errors.Is(err, ErrAlreadyOpen) {
		t.Fatalf("second open: %v", err)
	}
	p.Close()
	if _, _, err := Open(path, &Options{Layout: "other", Durability: Process}); !errors.Is(err, ErrWrongLayout) {
		t.Fatalf("wrong layout: %v", err)
	}
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	f.WriteAt([]byte("XX"), 100)
	f.WriteAt([]byte("XX"), 4096+100)
	f.Close()
	if _, _, err := Open(path, processOpts); !errors.Is(err, ErrBadChecksum) {
		t.Fatalf("corrupt header: %v", err)
	}
	os.Truncate(path, 1<<20)
	if _, _, err := Open(path, processOpts); !errors.Is(err, ErrBadChecksum) && !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestFullPoolAndHugeRegion(t *testing.T) {
	p, _ := mustOpen(t, tmpPool(t, "full.pool"), &Options{Layout: "test", Durability: Process, MaxSize: 8 << 20})
	defer p.Close()
	err := p.Txn(func(tx *Tx) error {
		for i := 0; i < 64; i++ {
			if _, err := Make[byte](tx, 1<<20, 1<<20); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrPoolFull) {
		t.Fatalf("want ErrPoolFull, got %v", err)
	}
	// a region whose undo log cannot fit: log a 2.5 MiB array in an 8 MiB pool
	type big struct{ Data []byte }
	err = p.Txn(func(tx *Tx) error {
		b, err := New[big](tx)
		if err != nil {
			return err
		}
		if b.Data, err = Make[byte](tx, 5<<19, 5<<19); err != nil {
			return err
		}
		return SetRoot(tx, "big", b)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Root[big](p, "big")
	err = p.Txn(func(tx *Tx) error {
		if err := LogSlice(tx, b.Data); err != nil {
			return err
		}
		b.Data[0] = 1
		return nil
	})
	if !errors.Is(err, ErrPoolFull) || b.Data[0] != 0 {
		t.Fatalf("want ErrPoolFull for a log larger than the pool, got %v (data %d)", err, b.Data[0])
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestLockTimeoutAndConcurrentCounters(t *testing.T) {
	path := tmpPool(t, "locks.pool")
	p, _ := mustOpen(t, path, &Options{Layout: "test", Durability: Process, LockTimeout: 50 * time.Millisecond})
	defer p.Close()
	type counter struct{ N uint64 }
	if err := p.Txn(func(tx *Tx) error {
		c, err := New[counter](tx)
		if err != nil {
			return err
		}
		return SetRoot(tx, "c", c)
	}); err != nil {
		t.Fatal(err)
	}
	c, _ := Root[counter](p, "c")

	held, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = p.Txn(func(tx *Tx) error {
			if err := tx.Lock(c); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	err := p.Txn(func(tx *Tx) error { return tx.Lock(c) })
	close(release)
	wg.Wait()
	if !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("want ErrLockTimeout, got %v", err)
	}

	const workers, each = 4, 25
	var failures sync.Map
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				for {
					err := p.Txn(func(tx *Tx) error {
						if err := tx.Lock(c); err != nil {
							return err
						}
						if err := tx.Log(&c.N); err != nil {
							return err
						}
						c.N++
						return nil
					})
					if err == nil {
						break
					}
					if !errors.Is(err, ErrLockTimeout) {
						failures.Store(err.Error(), true)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	failures.Range(func(k, _ any) bool { t.Error(k); return true })
	if c.N != workers*each {
		t.Fatalf("counter %d, want %d", c.N, workers*each)
	}
}

func TestPersist(t *testing.T) {
	for _, mode := range []Durability{Pmem, Msync, Process} {
		p, _ := mustOpen(t, tmpPool(t, "persist.pool"), &Options{Layout: "test", Durability: mode})
		buildList(t, p, 1)
		head, _ := Root[node](p, "list")
		if err := p.Persist(head); err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		if err := p.Persist(&node{}); !errors.Is(err, ErrBadPointer) {
			t.Fatalf("Persist of Go-heap memory: %v", err)
		}
		p.Close()
	}
}
