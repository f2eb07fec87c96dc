// report.go: what an open did and which durability mode the pool runs in,
// for programs that report it (engram-redis's INFO persistence).
//
// Invariants: read-only queries of the open pool (engram_pool_info,
// engram_pool_open_report); they change nothing in the pool, so they have
// no crash behaviour of their own.
package engram

/*
#include "engram.h"
*/
import "C"

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
