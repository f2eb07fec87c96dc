// persistinfo.go: INFO's Persistence section: the pool, the durability
// mode it runs in (the engine's choice for --durability auto), what the
// last open did (recovery, recovery GC) and the group-commit counters; and
// the server's recovery GC policy (recoveryGCPolicy).
//
// Invariants: reads server and pool state only (nothing is written, so
// there is no crash behaviour here). After a crash the engine collects the
// crash's garbage in the background by default (RecoveryGCDeferredCards:
// every pool write of the server is inside a transaction, which is what
// that write barrier needs); INFO reports it as pending, then finished,
// from engram_recovery_gc_status (never blocks).
package redis

import (
	"fmt"
	"os"
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

// recoveryGCPolicy is the engine's recovery GC policy for this server:
// in the background (the region card table, any kernel) unless
// --recovery-gc eager; ENGRAM_RECOVERY_GC, when set, overrides both.
func recoveryGCPolicy(cfg Config) engram.RecoveryGC {
	switch {
	case os.Getenv("ENGRAM_RECOVERY_GC") != "":
		return engram.RecoveryGCAuto
	case cfg.EagerRecoveryGC:
		return engram.RecoveryGCEager
	default:
		return engram.RecoveryGCDeferredCards
	}
}

// recoveryGC is INFO's engram_recovery_gc: "none" (a clean open or a new
// pool: nothing to collect), "finished" (collected during the open, before
// the server answered, or in the background since), "pending" (collecting
// in the background while the server answers), "stopped" or "failed"
// (the next open recovers again); with the engine's status.
func (s *Server) recoveryGC() (string, engram.RecoveryGCStatus) {
	st, err := s.pool.RecoveryGCStatus()
	switch {
	case err != nil && s.open.rep.RecoveryGC:
		return "finished", st
	case err != nil:
		return "none", st
	case st.State == engram.RecoveryGCInOpen:
		return "finished", st
	}
	return st.State.String(), st
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
	gc, st := s.recoveryGC()
	live, where := o.rep.LiveObjects, ""
	if st.State != engram.RecoveryGCInOpen && st.State != engram.RecoveryGCNotNeeded {
		live, where = st.LiveObjects, "background"
	}
	fmt.Fprintf(b, "engram_undone_regions:%d\r\nengram_recovery_gc:%s\r\nengram_recovery_gc_live_objects:%d\r\n",
		o.rep.UndoneRegions, gc, live)
	if where == "background" {
		fmt.Fprintf(b, "engram_recovery_gc_in:%s\r\nengram_recovery_gc_marked:%d\r\nengram_recovery_gc_freed:%d\r\n", where, st.Marked, st.Freed)
		fmt.Fprintf(b, "engram_recovery_gc_dirty_pages:%d\r\nengram_recovery_gc_concurrent_us:%d\r\nengram_recovery_gc_pause_us:%d\r\n",
			st.DirtyPages, st.Concurrent.Microseconds(), st.Pause.Microseconds())
	}
	fmt.Fprintf(b, "engram_group_commit_batches:%d\r\nengram_group_commit_commands:%d\r\nengram_group_commit_avg_commands:%.2f\r\n",
		s.stats.batches, s.stats.batchCmds, avg)
	fmt.Fprintf(b, "engram_readonly_batches:%d\r\n", s.stats.readOnly) // of the batches, those run without a region (readonly.go)
	fmt.Fprintf(b, "rdb_changes_since_last_save:0\r\nrdb_last_save_time:%d\r\naof_enabled:0\r\n\r\n", s.lastSave)
}

// recoveryGCPending says whether the background recovery GC still runs
// (an online Collect would wait for it: the caller skips it meanwhile).
func (s *Server) recoveryGCPending() bool {
	st, err := s.pool.RecoveryGCStatus()
	return err == nil && st.State == engram.RecoveryGCPending
}
