// maxmem.go: CONFIG SET maxmemory as a soft limit. The pool's size is its
// hard limit (fixed at open; a write that does not fit gets -OOM and is
// rolled back); `CONFIG SET maxmemory N` (N > 0) adds Redis's check on
// top: while the process's heap is above N, the commands Redis 7.0 flags
// `denyoom` are refused with -OOM (queued in MULTI: the EXEC aborts), as
// Redis does above maxmemory with the noeviction policy; reads, deletes
// and DISCARD keep working. `CONFIG SET maxmemory 0` removes the limit.
//
// Invariants: the limit is server state, not pool state (not persistent,
// as a CONFIG SET is not in Redis without CONFIG REWRITE).
package redis

import (
	"math"
	"runtime/metrics"
	"strconv"
	"strings"
)

const errOOM = "OOM command not allowed when used memory > 'maxmemory'."

// denyOOM are the commands whose Redis 7.0 flags (commands.json) hold
// `denyoom`.
var denyOOM = flagged("denyoom")

// usedMemory is the process's live heap in bytes (cheap to read).
func usedMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// overMaxMemory tells whether a denyoom command must be refused now.
func (s *Server) overMaxMemory() bool {
	return s.softMax > 0 && usedMemory() > s.softMax
}

// oomRefuses is true (and the -OOM reply written) when command name must
// be refused by the soft limit (a denyoom command, or any command but
// EXEC, DISCARD, QUIT and RESET while the client is in MULTI).
func (s *Server) oomRefuses(cmd *command, inMulti bool, w *W) bool {
	// Queueing in MULTI takes memory too: Redis refuses every command but
	// EXEC, DISCARD, QUIT and RESET there.
	name := cmd.name
	queued := inMulti && name != "exec" && name != "discard" && name != "quit" && name != "reset"
	if (!cmd.denyOOM && !queued) || !s.overMaxMemory() {
		return false
	}
	w.Err(errOOM)
	return true
}

// queueOOM is EXEC's check: a transaction holding a denyoom command is
// aborted while over the limit.
func (s *Server) queueOOM(queue [][][]byte) bool {
	for _, args := range queue {
		if denyOOM[lowerASCII(args[0])] && s.overMaxMemory() {
			return true
		}
	}
	return false
}

// parseMemory reads a memory value as Redis's memtoull: a byte count with
// an optional unit (k, m, g: powers of 1000; kb, mb, gb: of 1024).
func parseMemory(v string) (uint64, bool) {
	s := strings.ToLower(v)
	mult := uint64(1)
	for _, u := range []struct {
		suf string
		m   uint64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > math.MaxUint64/mult {
		return 0, false
	}
	return n * mult, true
}
