// Package engram gives Go programs persistent memory in the model of
// go-pmem (George et al., USENIX ATC'20) — pnew, pmake, named objects and
// failure-atomic txn blocks — on the stock Go toolchain, over the Engram
// engine and its pool format (a pool written from Go opens in Rust and in
// `engram info/check`, and the other way round).
//
// A pool is a file mapped at a fixed address. Objects allocated with [New],
// [Make], [String] and [Bytes] live in the mapping, outside the Go heap:
// loads and stores are plain Go through ordinary pointers. Changes are made
// inside [Pool.Txn]: before modifying memory that existed before the
// transaction, log it ([Tx.Log], [LogSlice]); everything logged and
// allocated becomes durable together when the function returns nil, and is
// undone together on an error, a panic, or a crash.
//
//	pool, first, err := engram.Open("data/list.pool", &engram.Options{Layout: "list"})
//	err = pool.Txn(func(tx *engram.Tx) error {
//		head, _ := engram.Root[Node](pool, "head")   // nil on the first run
//		n, err := engram.New[Node](tx)              // pnew
//		if err != nil { return err }
//		n.Value, n.Next = 42, head                   // fresh object: no log needed
//		return engram.SetRoot(tx, "head", n)
//	})
//
// Rules (what the pool can hold, what is checked) are in docs/go.md. In
// short: struct, array, pointer, slice and string fields, and scalars; no
// maps, channels, funcs, interfaces or unsafe.Pointer (rejected with an
// error naming the field). Every pointer stored in the pool must point to
// the start of a pool object: a pointer into the Go heap would dangle after
// the next Go GC. Checked mode (on under `go test`, [Options.Checked]
// otherwise) verifies this at commit for everything logged or allocated.
//
// Concurrency: a Tx belongs to the goroutine running the Txn function (the
// goroutine is locked to its OS thread for the duration). Isolation between
// transactions is by [Tx.Lock] (two-phase locking: held to the end of the
// transaction, with a timeout error instead of a deadlock).
package engram

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#cgo LDFLAGS: -L${SRCDIR}/../target/go-lib -l:libengram_ffi.a -ldl -lpthread -lm
#include <stdlib.h>
#include "engram.h"
*/
import "C"

import (
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Durability modes (see docs/format.md).
type Durability uint32

const (
	// Auto picks Pmem on a DAX mapping, Msync on tmpfs, Wal elsewhere.
	Auto Durability = C.ENGRAM_DURABILITY_AUTO
	// Pmem: CLWB/CLFLUSHOPT/CLFLUSH (by CPUID) + SFENCE.
	Pmem Durability = C.ENGRAM_DURABILITY_PMEM
	// Msync: msync of the dirty pages at each commit (ordinary storage).
	Msync Durability = C.ENGRAM_DURABILITY_MSYNC
	// Process: no flushing; survives a process crash, not a power failure.
	Process Durability = C.ENGRAM_DURABILITY_PROCESS
	// Trace: records every store, flush and fence for the crash explorer.
	Trace Durability = C.ENGRAM_DURABILITY_TRACE
	// Wal: private mapping + write-ahead log, one fdatasync per commit
	// shared by concurrent commits (ordinary storage).
	Wal Durability = C.ENGRAM_DURABILITY_WAL
)

// Options of [Open] and [Create]. A nil *Options means the defaults.
type Options struct {
	// Layout names what the pool holds; checked on every open
	// (ErrWrongLayout). Default "engram-go".
	Layout string
	// InitialSize and MaxSize of the file in bytes (defaults 16 MiB, 64 GiB).
	InitialSize, MaxSize uint64
	// Durability mode (default Auto).
	Durability Durability
	// LockTimeout bounds a Tx.Lock wait (default 2 s).
	LockTimeout time.Duration
	// Checked verifies at commit that every pointer field logged or
	// allocated in the transaction points to a pool object (always on
	// under `go test`).
	Checked bool
	// Tracer records the pool's stores, flushes and fences (Trace mode).
	Tracer *Tracer
	// RecoveryGC: when an open after a crash collects the crash's garbage
	// (default RecoveryGCAuto: ENGRAM_RECOVERY_GC, else in the open).
	RecoveryGC RecoveryGC
}

// RecoveryGC says when an open after a crash collects the garbage the
// crash left (docs/gc.md); Pool.RecoveryGCStatus says where it stands.
type RecoveryGC uint32

const (
	// RecoveryGCAuto: ENGRAM_RECOVERY_GC (eager, deferred,
	// deferred-cards) if set, else RecoveryGCEager.
	RecoveryGCAuto RecoveryGC = C.ENGRAM_RECOVERY_GC_AUTO
	// RecoveryGCEager collects in the open, before it returns.
	RecoveryGCEager RecoveryGC = C.ENGRAM_RECOVERY_GC_EAGER
	// RecoveryGCDeferred collects in the background with the kernel's
	// soft-dirty bits as the write barrier (eagerly without them).
	RecoveryGCDeferred RecoveryGC = C.ENGRAM_RECOVERY_GC_DEFERRED
	// RecoveryGCDeferredCards collects in the background on any kernel,
	// its write barrier the transactions' own bookkeeping. Only for
	// programs that write the pool inside transactions alone: data written
	// directly and made durable with Persist is not seen.
	RecoveryGCDeferredCards RecoveryGC = C.ENGRAM_RECOVERY_GC_DEFERRED_CARDS
)

// Pool is an open pool. Its methods are safe for concurrent use.
type Pool struct {
	h       C.engram_pool
	closed  atomic.Bool
	base    uintptr // first byte of the mapping
	limit   uintptr // base + max size: every pool pointer is below it
	mode    Durability
	checked bool

	mu    sync.Mutex              // guards types, txs and spareAhead
	types map[reflect.Type]uint32 // Go type -> pool type id
	txs   map[C.engram_region]*Tx // running regions (for nesting)
	// Emptied log-ahead tables of ended regions, for the next regions'
	// LogRanges (a table is 16 KiB: one per region was most of a
	// pipelined server's garbage). Volatile.
	spareAhead []aheadTable
	// epoch is Tx.Epoch: random at the open, one more at every rollback.
	epoch atomic.Uint64
}

// RootInfo describes a named root ([Pool.Roots]).
type RootInfo struct {
	Name   string
	Addr   uintptr
	TypeID uint32
	Type   string // the pool's name of the type
	Array  bool
}

// call runs one cgo call on a locked OS thread, so that the thread-local
// error message is read on the thread that set it.
func call(f func() C.engram_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return status(f())
}

func (o *Options) layout() string {
	if o == nil || o.Layout == "" {
		return "engram-go"
	}
	return o.Layout
}

func (o *Options) createOptions(layout *C.char) (C.struct_engram_create_options, error) {
	var c C.struct_engram_create_options
	if err := status(C.engram_create_options_init(&c)); err != nil {
		return c, err
	}
	c.layout = layout
	if o != nil {
		if o.InitialSize != 0 {
			c.initial_size = C.uint64_t(o.InitialSize)
		}
		if o.MaxSize != 0 {
			c.max_size = C.uint64_t(o.MaxSize)
			if o.InitialSize == 0 && c.initial_size > c.max_size {
				c.initial_size = 0 // the engine's minimum
			}
		}
		c.durability = C.uint32_t(o.Durability)
		if o.Tracer != nil {
			c.tracer = o.Tracer.h
		}
	}
	return c, nil
}

// Open opens the pool at path, or creates it if there is no file. first is
// true when it was created: the program's first run (go-pmem's pmem.Init).
// A pool that was not closed cleanly is recovered first.
func Open(path string, opts *Options) (pool *Pool, first bool, err error) {
	if _, err := os.Stat(path); err == nil {
		p, err := openExisting(path, opts)
		return p, false, err
	}
	p, err := Create(path, opts)
	return p, err == nil, err
}

// Create creates a new pool file at path (ErrExists if there is one).
func Create(path string, opts *Options) (*Pool, error) {
	cpath, clayout := C.CString(path), C.CString(opts.layout())
	defer C.free(unsafe.Pointer(cpath))
	defer C.free(unsafe.Pointer(clayout))
	var h C.engram_pool
	err := call(func() C.engram_status {
		c, err := opts.createOptions(clayout)
		if err != nil {
			return C.ENGRAM_ERR_INVALID_ARGUMENT
		}
		return C.engram_pool_create(cpath, &c, &h)
	})
	if err != nil {
		return nil, err
	}
	if opts != nil && opts.LockTimeout != 0 {
		// The lock timeout is an open option: close and open again.
		if err := call(func() C.engram_status { return C.engram_pool_close(h) }); err != nil {
			return nil, err
		}
		return openExisting(path, opts)
	}
	return newPool(h, opts)
}

func openExisting(path string, opts *Options) (*Pool, error) {
	cpath, clayout := C.CString(path), C.CString(opts.layout())
	defer C.free(unsafe.Pointer(cpath))
	defer C.free(unsafe.Pointer(clayout))
	var h C.engram_pool
	err := call(func() C.engram_status {
		var o C.struct_engram_open_options
		if s := C.engram_open_options_init(&o); s != C.ENGRAM_OK {
			return s
		}
		o.layout = clayout
		if opts != nil {
			o.durability = C.uint32_t(opts.Durability)
			if opts.LockTimeout != 0 {
				o.lock_timeout_ms = C.uint64_t(max(opts.LockTimeout.Milliseconds(), 1))
			}
			if opts.Tracer != nil {
				o.tracer = opts.Tracer.h
			}
		}
		rgc := C.uint32_t(0)
		if opts != nil {
			rgc = C.uint32_t(opts.RecoveryGC)
		}
		return C.engram_pool_open_recovery_gc(cpath, &o, rgc, &h)
	})
	if err != nil {
		return nil, err
	}
	return newPool(h, opts)
}

func newPool(h C.engram_pool, opts *Options) (*Pool, error) {
	var info C.struct_engram_info
	if err := call(func() C.engram_status { return C.engram_pool_info(h, &info) }); err != nil {
		return nil, err
	}
	p := &Pool{
		h:       h,
		base:    uintptr(info.base),
		limit:   uintptr(info.base + info.max_size),
		mode:    Durability(info.durability),
		checked: testing.Testing() || (opts != nil && opts.Checked),
		types:   map[reflect.Type]uint32{},
		txs:     map[C.engram_region]*Tx{},
	}
	p.epoch.Store(rand.Uint64())
	return p, nil
}

// Close closes the pool cleanly. Using the pool (or pointers into it)
// afterwards is an error (ErrClosed) or, for pointers, a fault: the
// mapping is gone. ErrBusy while transactions are running.
func (p *Pool) Close() error {
	if p.closed.Load() {
		return fail(ErrClosed, "pool already closed")
	}
	err := call(func() C.engram_status { return C.engram_pool_close(p.h) })
	if err == nil {
		p.closed.Store(true)
	}
	return err
}

// Collect runs the garbage collector now: everything not reachable from a
// root is freed. It waits for running transactions; ErrBusy inside one.
func (p *Pool) Collect() error {
	return call(func() C.engram_status { return C.engram_collect(p.h, nil) })
}

// Check walks every reachable object and pointer; ErrCorrupt or
// ErrBadPointer names the first inconsistency.
func (p *Pool) Check() error {
	return call(func() C.engram_status { return C.engram_check(p.h, nil) })
}

// Roots lists the named roots.
func (p *Pool) Roots() ([]RootInfo, error) {
	var n C.size_t
	if err := call(func() C.engram_status { return C.engram_roots_list(p.h, nil, 0, &n) }); err != nil {
		return nil, err
	}
	buf := make([]C.struct_engram_root_info, n+8)
	if err := call(func() C.engram_status {
		return C.engram_roots_list(p.h, &buf[0], C.size_t(len(buf)), &n)
	}); err != nil {
		return nil, err
	}
	out := make([]RootInfo, 0, n)
	for _, r := range buf[:min(int(n), len(buf))] {
		out = append(out, RootInfo{
			Name:   C.GoString(&r.name[0]),
			Addr:   uintptr(r.addr),
			TypeID: uint32(r.type_id),
			Type:   p.typeName(uint32(r.type_id)),
			Array:  r.array != 0,
		})
	}
	return out, nil
}

func (p *Pool) typeName(id uint32) string {
	var size, hash C.uint64_t
	var align C.uint32_t
	var name [128]C.char
	if call(func() C.engram_status {
		return C.engram_type_info(p.h, C.uint32_t(id), &size, &align, &hash, &name[0], C.size_t(len(name)))
	}) != nil {
		return ""
	}
	return C.GoString(&name[0])
}

// ObjectCount is the number of elements of the pool object whose payload
// starts at addr (1 for a plain object, the count of an array from Make);
// ErrBadPointer if no allocated object starts there.
func (p *Pool) ObjectCount(addr unsafe.Pointer) (int, error) {
	var id C.uint32_t
	var count C.uint64_t
	var array C.uint32_t
	err := call(func() C.engram_status {
		return C.engram_object_info(p.h, C.uint64_t(uintptr(addr)), &id, &count, &array)
	})
	return int(count), err
}

// Contains reports whether [addr, addr+n) lies in the pool's address range.
func (p *Pool) Contains(addr unsafe.Pointer, n uintptr) bool {
	return p.contains(uintptr(addr), n)
}

func (p *Pool) contains(a, n uintptr) bool {
	return a >= p.base && a+n >= a && a+n <= p.limit
}

// ABIVersion is the C ABI version of the linked engine (one cgo call; the
// benchmarks use it to measure the cost of a cgo round trip).
func ABIVersion() uint32 { return uint32(C.engram_abi_version()) }
