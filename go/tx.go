package engram

// tx.go: failure-atomic transactions (go-pmem's txn blocks) and everything
// done inside one: pnew/pmake (New, Make, String, Bytes), undo logging
// (Tx.Log, LogSlice), two-phase locks (Tx.Lock) and named roots.
//
// A Txn runs its function with the goroutine locked to its OS thread,
// because the engine's region (and its undo-log slot) belongs to a thread.
// Protocol and crash behaviour are the engine's (engram_region_* in
// include/engram.h): until the outermost Txn returns nil nothing is
// durable and a crash undoes it; after, all of it is durable.

/*
#include <stdlib.h>
#include "engram.h"
*/
import "C"

import (
	"fmt"
	"reflect"
	"runtime"
	"unsafe"
)

// Tx is a running transaction. It is valid only inside the Txn function
// that received it, on that goroutine; afterwards every method returns
// ErrTxEnded.
type Tx struct {
	pool  *Pool
	r     C.engram_region
	depth int
	ended bool
	// Checked mode: values to verify at commit (address and Go type).
	check []checked
	// The last type allocated and its pool id (allocation loops use one type).
	lastType reflect.Type
	lastID   uint32
	// The ranges this region logged last (a ring): a Log inside one of
	// them is answered here, without the cgo call (the engine would find
	// it covered and do nothing). Volatile, per region, like the engine's
	// own set; only ranges the engine accepted go in.
	recent [logCacheSize]span
	next   int
	// The ranges the last LogRanges logged ahead, by start address: a
	// Log of a range that starts at one and ends inside it is answered
	// here, without the cgo call (aheadTable.covers). Volatile, per region.
	ahead aheadTable
	// LogBatch's pairs, copied here for the cgo call (a batch passed to C
	// itself would escape to the heap: one allocation per batch).
	logBuf [2 * logBatchMax]uint64
	// allocOut is where the engine's allocation calls put the new
	// object's address (a local passed to C would escape to the heap:
	// one 8-byte allocation per New, Make, String and Bytes).
	allocOut C.uint64_t
}

// logCacheSize is how many recently logged ranges a Tx remembers: enough
// for a command's counters and headers (a list's length, a dict's count)
// that every command of a batch logs again.
const logCacheSize = 8

type span struct{ addr, end uintptr }

type checked struct {
	addr uintptr
	typ  reflect.Type
	n    int // elements (arrays)
}

// Txn runs fn as one failure-atomic transaction. If fn returns nil,
// everything it logged, allocated and changed is durable when Txn returns;
// if fn returns an error or panics, all of it is undone (the panic is
// raised again after the rollback). A Txn inside a Txn on the same
// goroutine joins it (nesting is flattened): an error from the inner one
// makes the outer one roll back with ErrAborted.
func (p *Pool) Txn(fn func(tx *Tx) error) (err error) {
	if p.closed.Load() {
		return fail(ErrClosed, "Txn on a closed pool")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r C.engram_region
	if err := status(C.engram_region_begin(p.h, &r)); err != nil {
		return err
	}
	p.mu.Lock()
	tx := p.txs[r]
	if tx == nil {
		tx = &Tx{pool: p, r: r}
		p.txs[r] = tx
	}
	p.mu.Unlock()
	tx.depth++
	committed := false
	defer func() {
		if committed {
			return
		}
		// An error or a panic: abort this level (the outermost undoes all).
		tx.end(false)
	}()
	if err = fn(tx); err != nil {
		return err
	}
	committed = true
	return tx.end(true)
}

// end finishes one nesting level; at the outermost, commits or aborts.
func (tx *Tx) end(commit bool) error {
	tx.depth--
	if commit && tx.depth == 0 && tx.pool.checked {
		if err := tx.verify(); err != nil {
			_ = tx.finish(false)
			return err
		}
	}
	return tx.finish(commit)
}

func (tx *Tx) finish(commit bool) error {
	var s C.engram_status
	if commit {
		s = C.engram_region_commit(tx.r)
	} else {
		s = C.engram_region_abort(tx.r)
	}
	err := status(s)
	if !commit || err != nil {
		// Whatever this region stored without a log (Epoch) may be left
		// half changed by the rollback: no stamp taken before it holds.
		tx.pool.epoch.Add(1)
	}
	if tx.depth == 0 {
		tx.ended = true
		tx.ahead.reset()
		tx.pool.mu.Lock()
		delete(tx.pool.txs, tx.r)
		if tx.ahead.slots != nil && len(tx.pool.spareAhead) < maxSpareAhead {
			tx.pool.spareAhead = append(tx.pool.spareAhead, tx.ahead)
		}
		tx.pool.mu.Unlock()
		tx.ahead = aheadTable{}
	}
	return err
}

// maxSpareAhead bounds the emptied log-ahead tables a pool keeps (one per
// thread that logs ahead at once is enough).
const maxSpareAhead = 8

// takeAhead gives tx an emptied log-ahead table of an ended region, or a
// new one.
func (tx *Tx) takeAhead() {
	p := tx.pool
	p.mu.Lock()
	if n := len(p.spareAhead); n > 0 {
		tx.ahead = p.spareAhead[n-1]
		p.spareAhead[n-1] = aheadTable{}
		p.spareAhead = p.spareAhead[:n-1]
	}
	p.mu.Unlock()
	if tx.ahead.slots == nil {
		tx.ahead.slots = make([]span, aheadSlots)
	}
}

// Epoch is a number that changes whenever the pool is opened (a new open
// starts at a random value) and whenever a region rolls back (an abort,
// or a commit that failed), and at no other time. It is for words a front
// end keeps in the pool without logging them, because it can compute
// them again from logged data (a rollback does not restore such words,
// and a crash may leave them half written): it stamps them with Epoch
// when it computes them, keeps them up to date in its regions, and
// trusts them only while the stamp still equals Epoch. Such words must
// not be pointers (the collector follows pointers whatever their stamp).
// Volatile; safe to call from any goroutine.
func (tx *Tx) Epoch() uint64 { return tx.pool.epoch.Load() }

func (tx *Tx) live() error {
	if tx == nil || tx.ended {
		return fail(ErrTxEnded, "the transaction's region has ended")
	}
	return nil
}

// Log undo-logs what p points to so the transaction may change it: a
// field (&n.Value) or a whole object (n). Objects allocated in this
// transaction need no log. p must point into the pool (ErrBadPointer).
func (tx *Tx) Log(p any) error {
	if err := tx.live(); err != nil {
		return err
	}
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fail(ErrInvalidArgument, "Log needs a non-nil pointer, got %T", p)
	}
	size := v.Type().Elem().Size()
	addr := uintptr(v.UnsafePointer())
	if err := tx.logRange(addr, size); err != nil {
		return err
	}
	tx.track(addr, v.Type().Elem(), 1)
	return nil
}

func (tx *Tx) logRange(addr, size uintptr) error {
	if size == 0 {
		return nil
	}
	end := addr + size
	if tx.ahead.covers(addr, end) || tx.recentCovers(addr, end) {
		return nil
	}
	if !tx.pool.contains(addr, size) {
		return fail(ErrBadPointer, "%#x+%d is not in the pool (Go heap memory needs no log)", addr, size)
	}
	if err := status(C.engram_region_log(tx.r, C.uint64_t(addr), C.uint64_t(size))); err != nil {
		return err
	}
	tx.recent[tx.next] = span{addr, end}
	tx.next = (tx.next + 1) % logCacheSize
	return nil
}

func (tx *Tx) track(addr uintptr, t reflect.Type, n int) {
	if tx.pool.checked && hasPointers(t) {
		tx.check = append(tx.check, checked{addr, t, n})
	}
}

// LogSlice undo-logs the elements of s (reslice for a range: s[i:j]).
func LogSlice[T any](tx *Tx, s []T) error {
	if err := tx.live(); err != nil {
		return err
	}
	if len(s) == 0 {
		return nil
	}
	var zero T
	size := unsafe.Sizeof(zero) * uintptr(len(s))
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	if err := tx.logRange(addr, size); err != nil {
		return err
	}
	tx.track(addr, reflect.TypeFor[T](), len(s))
	return nil
}

// LogBatch collects ranges to undo-log together: Tx.LogBatch logs them
// with one engine call and one fence (engram_region_log_many), where a Log
// each costs a call and a fence per range not yet logged. Fill it with
// BatchLog and BatchLogSlice, then call Tx.LogBatch before changing any
// of them. The zero value is an empty batch.
type LogBatch struct {
	pairs [2 * logBatchMax]uint64
	n     int
	err   error
}

// logBatchMax is how many ranges a LogBatch holds; Tx.LogBatch takes
// larger sets in several calls.
const logBatchMax = 32

// BatchLog adds what p points to (a field or a whole object) to b.
func BatchLog[T any](tx *Tx, b *LogBatch, p *T) {
	var zero T
	batchAdd(tx, b, uintptr(unsafe.Pointer(p)), unsafe.Sizeof(zero), reflect.TypeFor[T](), 1)
}

// BatchLogSlice adds the elements of s to b.
func BatchLogSlice[T any](tx *Tx, b *LogBatch, s []T) {
	var zero T
	batchAdd(tx, b, uintptr(unsafe.Pointer(unsafe.SliceData(s))), unsafe.Sizeof(zero)*uintptr(len(s)), reflect.TypeFor[T](), len(s))
}

func batchAdd(tx *Tx, b *LogBatch, addr, size uintptr, t reflect.Type, n int) {
	if b.err != nil || size == 0 {
		return
	}
	if b.err = tx.live(); b.err != nil {
		return
	}
	// The log-ahead table first: a pipeline's commands log what was
	// logged ahead for them, and its probe is cheaper than the ring's scan.
	if tx.ahead.covers(addr, addr+size) {
		tx.track(addr, t, n) // LogRanges recorded nothing for checked mode
		return
	}
	if tx.recentCovers(addr, addr+size) {
		return // logged by this region already
	}
	if !tx.pool.contains(addr, size) {
		b.err = fail(ErrBadPointer, "%#x+%d is not in the pool (Go heap memory needs no log)", addr, size)
		return
	}
	if b.n == logBatchMax {
		if b.err = tx.LogBatch(b); b.err != nil {
			return
		}
	}
	b.pairs[2*b.n], b.pairs[2*b.n+1] = uint64(addr), uint64(size)
	b.n++
	tx.track(addr, t, n)
}

// LogBatch undo-logs every range added to b (one engine call, one fence)
// and empties b. An error from an earlier BatchLog is returned here.
func (tx *Tx) LogBatch(b *LogBatch) error {
	if err := b.err; err != nil {
		*b = LogBatch{}
		return err
	}
	if err := tx.live(); err != nil {
		return err
	}
	n := b.n
	if n == 0 {
		return nil
	}
	b.n = 0
	copy(tx.logBuf[:2*n], b.pairs[:2*n])
	if err := status(C.engram_region_log_many(tx.r, (*C.uint64_t)(unsafe.Pointer(&tx.logBuf[0])), C.uint64_t(n))); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		tx.recent[tx.next] = span{uintptr(b.pairs[2*i]), uintptr(b.pairs[2*i] + b.pairs[2*i+1])}
		tx.next = (tx.next + 1) % logCacheSize
	}
	return nil
}

// LogRanges undo-logs every range of pairs (pairs[2*i] an address in the
// pool, pairs[2*i+1] its length in bytes) with one engine call and one
// fence, as LogBatch does, for a set of any size held by the caller. It
// is for logging ahead: until the next LogRanges, a Log or BatchLog of
// a range that starts where one of these starts and ends inside it is
// answered by the Tx without an engine call (if its table had room);
// any other range inside them (whole 8-byte words: the engine tracks
// logged words) costs the call but no fence.
// The ranges are not recorded for checked
// mode's commit-time pointer check; the Log that precedes a change
// records what it changes. Every range must lie inside one object
// (ErrBadPointer otherwise; ranges before the bad one may be logged,
// which only costs their undo entries).
func (tx *Tx) LogRanges(pairs []uint64) error {
	if err := tx.live(); err != nil {
		return err
	}
	if len(pairs)%2 != 0 {
		return fail(ErrInvalidArgument, "LogRanges needs address and length pairs, got %d words", len(pairs))
	}
	if len(pairs) == 0 {
		return nil
	}
	// pairs holds no Go pointers and the engine does not keep it (cgo's
	// rules for passing Go memory).
	if err := status(C.engram_region_log_many(tx.r, (*C.uint64_t)(unsafe.Pointer(&pairs[0])), C.uint64_t(len(pairs)/2))); err != nil {
		tx.ahead.reset() // which ranges were logged is unknown: none is remembered
		return err
	}
	tx.ahead.reset()
	if tx.ahead.slots == nil {
		tx.takeAhead()
	}
	for i := 0; i < len(pairs); i += 2 {
		tx.ahead.add(uintptr(pairs[i]), uintptr(pairs[i]+pairs[i+1]))
	}
	return nil
}

// recentCovers is whether [addr, end) lies inside one of the ranges this
// region logged last (the ring). Small enough to inline.
func (tx *Tx) recentCovers(addr, end uintptr) bool {
	for i := range tx.recent {
		if r := &tx.recent[i]; r.addr <= addr && end <= r.end {
			return true
		}
	}
	return false
}

// aheadTable is an open-addressing table of ranges by start address
// (linear probing, at most aheadProbes slots per address). It is a
// cache: a range it has no room for is not remembered, and its Log then
// goes to the engine, which finds it logged (no fence). Pool addresses
// are not 0, so an empty slot (addr 0) ends a probe.
type aheadTable struct {
	slots []span   // nil until the region's first LogRanges (takeAhead)
	used  []uint32 // the slots holding a range, for reset
}

// aheadSlots is the table's size (a power of two): a pipeline of 16
// ten-key MSETs logs 320 ranges ahead.
const aheadSlots = 1024

// aheadProbes bounds a probe sequence.
const aheadProbes = 4

// aheadHash is addr's first slot (Fibonacci hashing of its word).
func aheadHash(addr uintptr) uint32 {
	return uint32((uint64(addr>>3) * 0x9E3779B97F4A7C15) >> (64 - 10))
}

// reset empties the table (only the slots in use are cleared).
func (a *aheadTable) reset() {
	for _, i := range a.used {
		a.slots[i] = span{}
	}
	a.used = a.used[:0]
}

// add remembers [addr, end), unless its probe sequence is full.
func (a *aheadTable) add(addr, end uintptr) {
	h := aheadHash(addr)
	for p := uint32(0); p < aheadProbes; p++ {
		i := (h + p) & (aheadSlots - 1)
		sl := &a.slots[i]
		switch {
		case sl.addr == 0:
			*sl = span{addr, end}
			a.used = append(a.used, i)
			return
		case sl.addr == addr:
			sl.end = max(sl.end, end)
			return
		}
	}
}

// covers is whether [addr, end) starts at a range the last LogRanges
// logged and ends inside it. Small enough to inline.
func (a *aheadTable) covers(addr, end uintptr) bool {
	if a.slots == nil {
		return false
	}
	h := aheadHash(addr)
	for p := uint32(0); p < aheadProbes; p++ {
		sl := &a.slots[(h+p)&(aheadSlots-1)]
		if sl.addr == addr {
			return end <= sl.end
		}
		if sl.addr == 0 {
			return false
		}
	}
	return false
}

// Lock takes the lock of the object p points to until the transaction ends
// (two-phase locking). If it cannot be had within the pool's lock timeout
// it fails with ErrLockTimeout and the transaction will roll back.
func (tx *Tx) Lock(p any) error {
	if err := tx.live(); err != nil {
		return err
	}
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fail(ErrInvalidArgument, "Lock needs a non-nil pointer, got %T", p)
	}
	return status(C.engram_region_lock(tx.r, C.uint64_t(uintptr(v.UnsafePointer()))))
}

// typeID is the pool's id of t; the first use records t's signature.
func (tx *Tx) typeID(t reflect.Type) (uint32, error) {
	if t == tx.lastType {
		return tx.lastID, nil
	}
	id, err := tx.lookupType(t)
	if err == nil {
		tx.lastType, tx.lastID = t, id
	}
	return id, err
}

func (tx *Tx) lookupType(t reflect.Type) (uint32, error) {
	tx.pool.mu.Lock()
	id, ok := tx.pool.types[t]
	tx.pool.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := tx.pool.typeID(t)
	if err != nil {
		return 0, err
	}
	return id, tx.recordSignature(t)
}

// New allocates a zeroed T in the pool (go-pmem's pnew). It is freed again
// if the transaction rolls back, and garbage after a crash unless linked
// from a root by a committed transaction.
func New[T any](tx *Tx) (*T, error) {
	if err := tx.live(); err != nil {
		return nil, err
	}
	t := reflect.TypeFor[T]()
	id, err := tx.typeID(t)
	if err != nil {
		return nil, err
	}
	if err := status(C.engram_alloc(tx.r, C.uint32_t(id), &tx.allocOut)); err != nil {
		return nil, err
	}
	addr := tx.allocOut
	tx.track(uintptr(addr), t, 1)
	return (*T)(ptr(uintptr(addr))), nil
}

// Make allocates a zeroed slice of len elements and capacity cap in the
// pool (go-pmem's pmake). A capacity of 0 gives a nil slice.
func Make[T any](tx *Tx, length, capacity int) ([]T, error) {
	if err := tx.live(); err != nil {
		return nil, err
	}
	if length < 0 || capacity < length {
		return nil, fail(ErrInvalidArgument, "Make: len %d, cap %d", length, capacity)
	}
	if capacity == 0 {
		return nil, nil
	}
	t := reflect.TypeFor[T]()
	id, err := tx.typeID(t)
	if err != nil {
		return nil, err
	}
	if err := status(C.engram_alloc_array(tx.r, C.uint32_t(id), C.uint64_t(capacity), &tx.allocOut)); err != nil {
		return nil, err
	}
	addr := tx.allocOut
	tx.track(uintptr(addr), t, capacity)
	return unsafe.Slice((*T)(ptr(uintptr(addr))), capacity)[:length], nil
}

// byteType is the engine's built-in byte type (id 1).
const byteType = 1

func (tx *Tx) bytes(n int) (unsafe.Pointer, error) {
	if err := status(C.engram_alloc_array(tx.r, byteType, C.uint64_t(n), &tx.allocOut)); err != nil {
		return nil, err
	}
	addr := tx.allocOut
	return ptr(uintptr(addr)), nil
}

// String copies s into the pool and returns the pool copy ("" stays "").
func String(tx *Tx, s string) (string, error) {
	if err := tx.live(); err != nil || s == "" {
		return "", err
	}
	p, err := tx.bytes(len(s))
	if err != nil {
		return "", err
	}
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return unsafe.String((*byte)(p), len(s)), nil
}

// Bytes copies b into the pool and returns the pool copy (nil for empty).
func Bytes(tx *Tx, b []byte) ([]byte, error) {
	if err := tx.live(); err != nil || len(b) == 0 {
		return nil, err
	}
	p, err := tx.bytes(len(b))
	if err != nil {
		return nil, err
	}
	out := unsafe.Slice((*byte)(p), len(b))
	copy(out, b)
	return out, nil
}

// Free frees the object p points to (a pointer from New) when the
// transaction commits.
func (tx *Tx) Free(p any) error {
	if err := tx.live(); err != nil {
		return err
	}
	v := reflect.ValueOf(p)
	var addr uintptr
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice:
		addr = uintptr(v.UnsafePointer())
	default:
		return fail(ErrInvalidArgument, "Free needs a pointer or slice, got %T", p)
	}
	return status(C.engram_free(tx.r, C.uint64_t(addr)))
}

// SetRoot points the root name at p (a pointer to a pool object, or a nil
// pointer), atomically with the rest of the transaction (go-pmem's
// pmem.Make names an object the same way).
func SetRoot(tx *Tx, name string, p any) error {
	if err := tx.live(); err != nil {
		return err
	}
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer {
		return fail(ErrInvalidArgument, "SetRoot needs a pointer, got %T (put slices in a struct)", p)
	}
	id, err := tx.typeID(v.Type().Elem())
	if err != nil {
		return err
	}
	addr := uintptr(v.UnsafePointer())
	if addr != 0 && !tx.pool.contains(addr, 1) {
		return fail(ErrVolatilePointer, "root %q: %#x is Go-heap memory, not a pool object (allocate it with engram.New)", name, addr)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return status(C.engram_root_set(tx.r, cname, C.uint64_t(addr), C.uint32_t(id), 0))
}

// DeleteRoot removes the root name (ErrNoRoot if there is none). The
// object it named becomes garbage unless reachable otherwise.
func DeleteRoot(tx *Tx, name string) error {
	if err := tx.live(); err != nil {
		return err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var existed C.uint32_t
	if err := status(C.engram_root_remove(tx.r, cname, &existed)); err != nil {
		return err
	}
	if existed == 0 {
		return ErrNoRoot
	}
	return nil
}

// Root returns the object the root name points to (go-pmem's pmem.Get):
// ErrNoRoot if there is no such root, ErrRootType if it holds another
// type, ErrLayoutMismatch (naming the field) if T changed since the pool
// was written. A null root gives (nil, nil).
func Root[T any](pool *Pool, name string) (*T, error) {
	var out *T
	var lookup error
	// The lookup's own failure (no root, another type) is returned, not
	// passed to Txn: inside a running transaction it must not doom it.
	err := pool.Txn(func(tx *Tx) error {
		out, lookup = rootIn[T](tx, name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, lookup
}

func rootIn[T any](tx *Tx, name string) (*T, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var r C.struct_engram_root
	if err := status(C.engram_root_get(tx.r, cname, &r)); err != nil {
		return nil, err
	}
	if r.found == 0 {
		return nil, ErrNoRoot
	}
	id, err := tx.typeID(reflect.TypeFor[T]())
	if err != nil {
		return nil, err
	}
	if uint32(r.type_id) != id || r.array != 0 {
		return nil, fail(ErrRootType, "root %q holds %s, not %s", name, tx.pool.typeName(uint32(r.type_id)), typeName(reflect.TypeFor[T]()))
	}
	return (*T)(ptr(uintptr(r.addr))), nil
}

// ptr turns a pool address into a pointer. Pool memory is outside the Go
// heap, so the Go GC ignores these pointers, and they stay valid until the
// pool is closed.
func ptr(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

// String returns a description for debugging.
func (tx *Tx) String() string { return fmt.Sprintf("engram.Tx(region %d)", tx.r) }
