// persistinfo.go: INFO's Persistence section: the pool, the durability
// mode it runs in (the engine's choice for --durability auto), what the
// last open did (recovery, recovery GC) and the group-commit counters.
//
// Invariants: reads server and pool state only (nothing is written, so
// there is no crash behaviour here). The recovery GC state comes from the
// open report today (the engine runs the GC inside the open, so it is
// "finished" before the first reply); recoveryGCState is the one place to
// read the engine's deferred-GC status once the C ABI has it.
package redis

import (
	"fmt"
	"strings"
	"time"

	engram "github.com/engram-pm/engram-go"
)

// openInfo is what New measured and read about the open.
type openInfo struct {
	took    time.Duration
	created bool
	rep     engram.OpenReport
}

func (o openInfo) String() string {
	return fmt.Sprintf("opened in %s (new pool: %v)", o.took.Round(time.Microsecond), o.created)
}

// recoveryGCState is INFO's engram_recovery_gc: "none" (a clean open or a
// new pool: nothing to collect), "finished" (the GC ran during the open,
// before the server answered). Hook for the engine's deferred recovery GC
// (branch gc8; expected C ABI: engram_recovery_gc_status, pending while the
// background GC runs): report "pending" from the open until it says done,
// then "finished" with its counts.
func (s *Server) recoveryGCState() string {
	switch {
	case s.open.rep.RecoveryGC:
		return "finished"
	default:
		return "none"
	}
}

func (s *Server) writePersistenceInfo(b *strings.Builder) {
	o := s.open
	avg := 0.0
	if s.stats.batches > 0 {
		avg = float64(s.stats.batchCmds) / float64(s.stats.batches)
	}
	fmt.Fprintf(b, "# Persistence\r\nloading:0\r\nengram_pool:%s\r\nengram_durability:%s\r\nengram_durability_asked:%s\r\n",
		s.cfg.Pool, durabilityName(s.pool.Mode()), durabilityName(s.cfg.Durability))
	fmt.Fprintf(b, "engram_last_recovery:%s\r\nengram_open_us:%d\r\nengram_new_pool:%d\r\nengram_was_clean:%d\r\n",
		o, o.took.Microseconds(), b2i(o.created), b2i(o.rep.WasClean || o.created))
	fmt.Fprintf(b, "engram_undone_regions:%d\r\nengram_recovery_gc:%s\r\nengram_recovery_gc_live_objects:%d\r\n",
		o.rep.UndoneRegions, s.recoveryGCState(), o.rep.LiveObjects)
	fmt.Fprintf(b, "engram_group_commit_batches:%d\r\nengram_group_commit_commands:%d\r\nengram_group_commit_avg_commands:%.2f\r\n",
		s.stats.batches, s.stats.batchCmds, avg)
	fmt.Fprintf(b, "rdb_changes_since_last_save:0\r\nrdb_last_save_time:%d\r\naof_enabled:0\r\n\r\n", s.lastSave)
}
