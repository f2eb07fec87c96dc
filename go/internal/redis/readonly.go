// readonly.go: a batch whose every command is a read runs without a
// region (issue 8, P1 GET): no region begin and commit, i.e. no cgo call
// and no commit work, for a batch that changes nothing in the pool. At
// pipeline 1 with 50 clients a batch is often one GET.
//
// What it keeps true:
//
//   - A reply shows only durable data. Every region of the server (a
//     batch's, runAlone's, a blocked client's retry, active expiry) begins
//     and commits under execMu, and a commit returns only once its region
//     is durable (pmem: flushed and fenced; msync: msync'd; wal: the group
//     commit's fdatasync that holds its records is done, wal.rs). A
//     read-only batch runs under execMu too, so no region is open or
//     pending while it reads: nothing it shows can be undone by a crash.
//   - A read that has to write runs in a region. The one such write of the
//     regionless commands is the lazy expiry of an expired key (Redis
//     deletes it on access): lookupDB, given no transaction, returns
//     errNeedsRegion before it changes anything (not even the key's WATCH
//     version). runReadOnly then discards every reply of the batch,
//     restores its clients' states and the server's counters, and reports
//     false; runBatch runs the batch again in a region, which deletes the
//     key, commits, and only then replies.
//   - A nil transaction is never used: dispatchCmd runs no command
//     outside regionless without one (errNeedsRegion: a wrong batch check
//     costs a rerun); lookupDB checks it; every other engram.Tx method
//     begins with the binding's live() check, which returns ErrTxEnded for
//     a nil Tx; a panic in a command is recovered by runRequest into an
//     error. Any error from the read-only run (not only
//     errNeedsRegion) means "run it in a region", so a command wrongly
//     listed in regionless costs a rerun, never a crash or a lost write
//     (TestRegionlessCommandsNilTx runs each listed command on every key
//     type with a nil transaction and fails on anything but a reply or
//     errNeedsRegion).
//   - Everything else keeps its behaviour: MULTI/EXEC, WATCH, blocking
//     commands, client-state and admin commands are not regionless, so a
//     batch holding one runs in a region as before; a regionless command
//     queued in MULTI only appends to the client's queue.
//
// Crash behaviour: none of its own (it writes nothing to the pool).
package redis

import (
	"bytes"
	"errors"
)

// regionless are the commands that run without a region: reads whose
// only pool write is the lazy expiry of the key they look up (through
// lookupDB), and commands that touch no key. Each was read for x.tx uses:
// none, but through x.lookup/x.typed. Sorted-set reads are not listed:
// ZRANK and friends restamp a skiplist's spans (pzset.go, ranked).
var regionless = map[string]bool{
	"get": true, "mget": true, "strlen": true, "getrange": true, "substr": true,
	"exists": true, "type": true, "ttl": true, "pttl": true, "expiretime": true, "pexpiretime": true,
	"hget": true, "hmget": true, "hexists": true, "hlen": true,
	"llen": true, "scard": true, "sismember": true,
	"dbsize": true, "ping": true, "echo": true,
}

// errNeedsRegion is a regionless command's report that it must write (an
// expired key to delete): its batch runs again in a region.
var errNeedsRegion = errors.New("engram-redis: the read needs a region")

// plantSkipExpiryFallback is for TestReadOnlyExpiryPlanted only: a
// read-only batch that finds an expired key answers as if it were gone
// but leaves it in the pool (no fallback to a region).
var plantSkipExpiryFallback bool

// readOnlyBatch is whether every command of live's requests is
// regionless (and the request is a client's commands).
func readOnlyBatch(live []*request) bool {
	for _, r := range live {
		if r.kind != reqCommands {
			return false
		}
		var prev []byte
		for _, args := range r.cmds {
			if prev != nil && bytes.Equal(args[0], prev) {
				continue // a pipeline of GETs: one lookup (as lookupCommands)
			}
			if cmd := lookupCommand(args[0]); cmd == nil || !cmd.regionless {
				return false
			}
			prev = args[0]
		}
	}
	return true
}

// runReadOnly runs live without a region; false (and nothing changed:
// replies dropped, client states and counters as before) if a command
// needs one.
func (s *Server) runReadOnly(live []*request, saved []clientState) bool {
	stats := s.stats
	for _, r := range live {
		if err := s.runRequest(nil, r); err != nil {
			s.stats = stats
			s.undoBatch(live, saved)
			return false
		}
	}
	return true
}
