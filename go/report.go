// report.go: what an open did, where its recovery GC stands and which
// durability mode the pool runs in, for programs that report it
// (engram-redis's INFO persistence).
//
// Invariants: read-only queries of the open pool (engram_pool_info,
// engram_pool_open_report, engram_recovery_gc_status); they change nothing
// in the pool, so they have no crash behaviour of their own.
// WaitRecoveryGC only blocks until a background recovery GC is done.
package engram

/*
#include "engram.h"
*/
import "C"

import "time"

// OpenReport says what the open that returned the pool did.
type OpenReport struct {
	WasClean      bool   // the pool was closed cleanly last time (no recovery)
	Relocated     bool   // mapped at a new address and its pointers rewritten
	UndoneRegions uint64 // regions rolled back by recovery
	UndoneEntries uint64 // undo-log entries rolled back by recovery
	RecoveryGC    bool   // the recovery GC ran during the open (LiveObjects, LiveBytes set)
	LiveObjects   uint64 // live objects the recovery GC found
	LiveBytes     uint64 // live payload bytes the recovery GC found
}

// Mode is the durability mode the pool runs in: the one asked for, or the
// engine's choice for Auto (pmem on DAX, msync on tmpfs, wal elsewhere).
func (p *Pool) Mode() Durability { return p.mode }

// OpenReport returns what the open did (recovery, relocation).
func (p *Pool) OpenReport() (OpenReport, error) {
	var r C.struct_engram_open_report
	if err := call(func() C.engram_status { return C.engram_pool_open_report(p.h, &r) }); err != nil {
		return OpenReport{}, err
	}
	return OpenReport{
		WasClean: r.was_clean != 0, Relocated: r.relocated != 0,
		UndoneRegions: uint64(r.undone_regions), UndoneEntries: uint64(r.undone_entries),
		RecoveryGC: r.recovered != 0, LiveObjects: uint64(r.live_objects), LiveBytes: uint64(r.live_bytes),
	}, nil
}

// RecoveryGCState is where the recovery GC of an open stands.
type RecoveryGCState uint32

const (
	RecoveryGCNotNeeded RecoveryGCState = 0 // a clean open or a new pool
	RecoveryGCInOpen    RecoveryGCState = 1 // collected in the open
	RecoveryGCPending   RecoveryGCState = 2 // collecting in the background
	RecoveryGCFinished  RecoveryGCState = 3 // the background collection finished
	RecoveryGCStopped   RecoveryGCState = 4 // stopped by Close; the next open recovers again
	RecoveryGCFailed    RecoveryGCState = 5 // failed (ErrorCode); the next open recovers again
)

func (s RecoveryGCState) String() string {
	switch s {
	case RecoveryGCNotNeeded:
		return "none"
	case RecoveryGCInOpen:
		return "eager"
	case RecoveryGCPending:
		return "pending"
	case RecoveryGCFinished:
		return "finished"
	case RecoveryGCStopped:
		return "stopped"
	case RecoveryGCFailed:
		return "failed"
	}
	return "unknown"
}

// RecoveryGCStatus is the progress of the recovery GC of this open.
type RecoveryGCStatus struct {
	State       RecoveryGCState
	ErrorCode   uint32        // with RecoveryGCFailed
	Marked      uint64        // objects marked by the concurrent phase
	LiveObjects uint64        // live objects after the sweep
	Freed       uint64        // slots and objects the sweep freed
	DirtyPages  uint64        // pool pages written during the concurrent phase
	BadFields   uint64        // pointer fields found pointing at no object
	Concurrent  time.Duration // the concurrent phase, wall time
	Pause       time.Duration // the final pause (world stopped), wall time
	PauseCPU    time.Duration // the final pause, CPU time
}

func gcStatus(r *C.struct_engram_recovery_gc_report) RecoveryGCStatus {
	return RecoveryGCStatus{
		State: RecoveryGCState(r.state), ErrorCode: uint32(r.error_code), Marked: uint64(r.marked),
		LiveObjects: uint64(r.live_objects), Freed: uint64(r.freed), DirtyPages: uint64(r.dirty_pages),
		BadFields: uint64(r.bad_fields), Concurrent: time.Duration(r.concurrent_ns),
		Pause: time.Duration(r.pause_ns), PauseCPU: time.Duration(r.pause_cpu_ns),
	}
}

// RecoveryGCStatus says where the recovery GC of this open stands (never blocks).
func (p *Pool) RecoveryGCStatus() (RecoveryGCStatus, error) {
	var r C.struct_engram_recovery_gc_report
	if err := call(func() C.engram_status { return C.engram_recovery_gc_status(p.h, &r) }); err != nil {
		return RecoveryGCStatus{}, err
	}
	return gcStatus(&r), nil
}

// WaitRecoveryGC blocks until a background recovery GC is no longer
// pending (ErrBusy inside a transaction of this goroutine's thread).
func (p *Pool) WaitRecoveryGC() (RecoveryGCStatus, error) {
	var r C.struct_engram_recovery_gc_report
	if err := call(func() C.engram_status { return C.engram_recovery_gc_wait(p.h, &r) }); err != nil {
		return RecoveryGCStatus{}, err
	}
	return gcStatus(&r), nil
}
