package engram

// persist.go: making a range durable from Go without cgo on the hot path.
// In Pmem mode the cache lines are written back with CLWB, CLFLUSHOPT or
// CLFLUSH (chosen by CPUID, as the engine's pmem.rs does) and ordered with
// SFENCE, in Go assembly (persist_amd64.s). In Msync, Wal and Trace modes the
// engine must see the range (msync of dirty pages; the tracer), so it goes
// through cgo; in Process mode nothing is needed.
//
// A transaction persists what it wrote at commit by itself: Persist is for
// data written outside transactions (e.g. a value published with one
// 8-byte store whose ordering the program manages).

/*
#include "engram.h"
*/
import "C"

import (
	"reflect"
	"unsafe"

	"github.com/engram-pm/engram-go/internal/flush"
)

// Persist makes the value p points to (or a slice's elements) durable.
func (pool *Pool) Persist(p any) error {
	v := reflect.ValueOf(p)
	switch v.Kind() {
	case reflect.Pointer:
		return pool.PersistRange(v.UnsafePointer(), v.Type().Elem().Size())
	case reflect.Slice:
		return pool.PersistRange(v.UnsafePointer(), uintptr(v.Len())*v.Type().Elem().Size())
	}
	return fail(ErrInvalidArgument, "Persist needs a pointer or a slice, got %T", p)
}

// PersistRange makes [addr, addr+n) of the pool durable.
func (pool *Pool) PersistRange(addr unsafe.Pointer, n uintptr) error {
	if n == 0 {
		return nil
	}
	if !pool.Contains(addr, n) {
		return fail(ErrBadPointer, "%p+%d is not in the pool", addr, n)
	}
	switch pool.mode {
	case Pmem:
		flush.Range(uintptr(addr), n)
		flush.SFENCE()
		return nil
	case Process:
		return nil
	}
	return call(func() C.engram_status { return C.engram_persist(pool.h, C.uint64_t(uintptr(addr)), C.uint64_t(n)) })
}
