// warm.go: before a client's pipeline runs, its keys' hash-table paths
// are read in passes over all of them (warmRequest), so that the cache
// misses of different keys overlap instead of each command's lookup
// taking its own one after another. A lookup in a big table costs three or four
// dependent misses (the bucket slot, the entry's header line, its hash
// line, the key bytes); perf put pDict.find plus the key compare at about
// a quarter of the server's CPU for INCR and HSET at pipeline 16. Each
// pass issues one independent load per key, so the out-of-order core has
// many of them in flight at once; the command's own lookup then finds the
// lines in the cache.
//
// Invariants: warming only reads (pool memory through the executor's own
// pointers, on the executor, between two commands of the region); it
// changes nothing in the pool or the server but s.warmSink, so a wrong
// guess (a key in another database after SELECT, a field that is not
// one) costs a few loads and nothing else.
//
// At pipeline 1 each request is one command, with nothing of its own to
// overlap; a batch's such lone commands (20-40 of 50 clients' at once)
// are warmed together at the start of its region instead (warmLone).
//
// Warming itself only reads; the pre-logging that follows it (prelog.go)
// writes undo entries, never the pool's data.
//
// Crash behaviour: none (no writes).
package redis

import (
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

// warmMax bounds the keys warmed per request (the lines they touch then
// still fit the core's L2).
const warmMax = 1024

// warmRef is one key being warmed: its table, hash and bytes, the chain
// entry the next pass looks at (the key's entry once found), and the
// field to warm in that entry's table (nil: none).
type warmRef struct {
	d     *pDict
	k     []byte
	h     uint64
	e     *pEntry
	found bool
	inNew bool     // looking in T1 (the table a growing table moves to)
	pre   bool     // the command writes a string under the key (prelog.go)
	guess valGuess // what the string write stores there (prelog.go)
	f     []byte
	fv    []byte  // the value HSET gives f (a key's ref; nil: none or not HSET's one pair)
	c     *pColl  // a field's ref: the collection whose table d is
	z     float64 // the score a ZADD gives f (zset: it tells one; zwarm.go)
	zset  bool
	zdone bool // f's sorted-set walks are warmed (zwarm took it: warmZ and the field stage skip it)
}

// warmRequest reads the table paths of the keys of every command of r
// (a client's pipeline), then those of the first field of the collection
// commands (fieldArg) whose key holds a table (a big hash, set or sorted
// set), then the skiplist walks of the sorted-set writes (warmZ). The
// executor calls it just before running r: a whole batch (50 clients'
// pipelines of 10-key MSETs: 8,000 keys) would not stay in the cache until
// its last command, one pipeline's keys do, and 16 of them are already
// more independent misses than the core keeps in flight.
//
// Then the pipeline's string writes are logged ahead (prelog.go): an
// error there (the pool is full) fails the batch's region.
//
// defs[i] is the command of r.cmds[i] (lookupCommands).
func (s *Server) warmRequest(tx *engram.Tx, r *request, defs []*command) error {
	if s.root == nil || r.c.db < 0 || r.c.db >= numDBs {
		return nil
	}
	if r.lone.def != nil && len(r.cmds) == 1 {
		// warmLone warmed it and hashed its one key.
		s.keyHints = append(s.keyHints[:0], r.lone.hint)
		return nil
	}
	refs, hints := s.warmRefs[:0], s.keyHints[:0]
	for i, args := range r.cmds {
		if len(refs) >= warmMax {
			break
		}
		n := len(refs)
		refs = appendKeyRefs(refs, s.root.DBs[r.c.db], defs[i], args)
		hints = append(hints, hintOf(refs[n:]))
	}
	s.keyHints = hints
	if len(refs) < 2 {
		// One key (a request of one GET, INCR, ZADD...): nothing to
		// overlap its misses with here; warmLone warmed it with the
		// batch's other lone commands.
		s.warmRefs = refs[:0]
		return nil
	}
	return s.warmKeys(tx, refs)
}

// loneMax bounds the lone commands of a batch warmed together (warmLone):
// their lines stay cached until the last of them runs.
const loneMax = 64

// warmLone warms together the commands that warmRequest leaves alone, a
// request of one command naming one key: at pipeline 1 every request is
// one (50 clients' ZADDs: a batch of 20-40 of them), and each command's
// misses (its key, its member, a ZADD's two skiplist walks) would
// otherwise come one after another. Their string writes and moves are
// logged ahead in one engine call (prelog). The executor calls it at the
// start of a batch's region, before any of its commands; each request's
// own warming then finds one key and skips it (warmRequest).
func (s *Server) warmLone(tx *engram.Tx, live []*request) error {
	if s.root == nil {
		return nil
	}
	refs := s.warmRefs[:0]
	for _, r := range live {
		if len(refs) >= loneMax {
			break
		}
		if r.kind != reqCommands || len(r.cmds) != 1 || len(r.cmds[0]) == 0 || r.c.db < 0 || r.c.db >= numDBs {
			continue
		}
		n := len(refs)
		def := lookupCommand(r.cmds[0][0])
		refs = appendKeyRefs(refs, s.root.DBs[r.c.db], def, r.cmds[0])
		if len(refs)-n != 1 {
			refs = refs[:n] // no key, or a request of several: warmRequest's
			continue
		}
		r.lone = loneWarm{def: def, hint: hintOf(refs[n:])}
	}
	if len(refs) < 2 {
		clear(refs)
		s.warmRefs = refs[:0]
		return nil
	}
	return s.warmKeys(tx, refs)
}

// loneWarm is what warmLone found for a request of one command naming
// one key: the command (nil: not warmed so) and the key's hint, which
// runRequest and warmRequest take instead of looking the name up and
// hashing the key again (at pipeline 1 every request did both twice;
// keeping them saves 9 % of INCR's and 14 % of SET's instructions in
// process: BenchmarkIncrP1, BenchmarkSetP1). A request is a new
// value each time it arrives (the event loop's reqBuf, submit), so its
// lone warming is its own; the hint holds only while its arguments do,
// which they do until it is answered.
type loneWarm struct {
	def  *command
	hint keyHint
}

// defs appends the commands of cmds (a request's) to buf: the one
// warmLone looked up, else lookupCommands'.
func (l *loneWarm) defs(buf []*command, cmds [][][]byte) []*command {
	if l.def != nil && len(cmds) == 1 {
		return append(buf, l.def)
	}
	return lookupCommands(buf, cmds)
}

// warmKeys warms refs (at least two keys' refs: one request's,
// warmRequest, or a batch's lone commands', warmLone) in the stages
// warmRequest describes, and logs their writes ahead (prelog).
// The fields' paths are walked before the logging ahead, which takes
// HSET's field writes too (prelog.go, appendPrelog).
func (s *Server) warmKeys(tx *engram.Tx, refs []warmRef) error {
	s.warmSink += walkRefs(refs)
	n := len(refs)
	for i := 0; i < n; i++ {
		ref := &refs[i]
		if ref.f == nil || !ref.found || ref.e.Coll == nil || ref.e.Coll.Dict == nil {
			continue // a sorted set has no Dict: zwarm takes its member
		}
		fr := warmRef{d: ref.e.Coll.Dict, k: ref.f, h: hashKey(ref.f), c: ref.e.Coll, z: ref.z, zset: ref.zset}
		if ref.fv != nil && ref.e.Type == tHash {
			fr.pre, fr.guess = true, valGuess{kind: guessValue, val: ref.fv}
		}
		refs = append(refs, fr)
	}
	s.warmSink += walkRefs(refs[n:])
	err := s.prelog(tx, refs)
	if err == nil {
		s.warmSink += warmZ(refs[:n], &s.zbuf) // a big sorted set's member table and skiplist: zwarm.go
	}
	clear(refs)
	s.warmRefs = refs[:0]
	return err
}

// keyHint is the hash warming computed for the first key of one command
// of the running request (p and n: that argument's bytes), so that the
// command's lookup (lookupDB) takes it instead of hashing the key again
// (FNV-1a, a byte at a time until redis13hset: ~2 % of the server's CPU
// for INCR at pipeline 16; hashKey reads words now). Set before each command (runRequest), dropped with the
// request (dropHints): it points into the client's arguments, which stay
// as they are while their request runs.
type keyHint struct {
	p *byte
	n int
	h uint64
}

// hintOf is the hint of a command whose key refs are refs (none: no key).
func hintOf(refs []warmRef) keyHint {
	if len(refs) == 0 {
		return keyHint{}
	}
	return keyHint{p: unsafe.SliceData(refs[0].k), n: len(refs[0].k), h: refs[0].h}
}

// hintAt is the hint of the running request's command i (none if
// warming stopped before it).
func (s *Server) hintAt(i int) keyHint {
	if i < len(s.keyHints) {
		return s.keyHints[i]
	}
	return keyHint{}
}

// dropHints forgets the running request's hints (they point into its
// arguments).
func (s *Server) dropHints() {
	clear(s.keyHints)
	s.keyHints, s.hint = s.keyHints[:0], keyHint{}
}

// hashOf is hashKey(k), the running command's hint when k is the very
// argument it was computed for (the same bytes at the same address).
func (s *Server) hashOf(k []byte) uint64 {
	if h := &s.hint; h.n == len(k) && h.n > 0 && h.p == unsafe.SliceData(k) {
		return h.h
	}
	return hashKey(k)
}

// appendKeyRefs adds the keys of one command (its table's key positions)
// to refs; the first key's ref carries the command's field (fieldArg).
func appendKeyRefs(refs []warmRef, d *pDict, cmd *command, args [][]byte) []warmRef {
	if cmd == nil || cmd.first <= 0 || cmd.first >= len(args) {
		return refs
	}
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
	last = min(last, len(args)-1)
	step := max(cmd.step, 1)
	pre := cmd.prelog
	for i := cmd.first; i <= last && len(refs) < warmMax; i += step {
		ref := warmRef{d: d, k: args[i], h: hashKey(args[i]), pre: pre}
		if pre {
			ref.guess = guessValueOf(cmd.name, args, i)
		}
		// Warming runs before dispatch checks the arity: fi may be past the
		// end. Only the first key carries a field (MSET's other keys do
		// not look the command's name up again).
		if i == cmd.first {
			if fi := fieldArg(cmd.name, len(args)); fi > cmd.first && fi < len(args) {
				ref.f = args[fi]
				ref.z, ref.zset = zwarmTarget(cmd.name, args)
				if cmd.name == "hset" && len(args) == 4 {
					ref.fv = args[3]
				}
			}
		}
		refs = append(refs, ref)
	}
	return refs
}

// fieldArg is the position of the field or member a collection command
// looks up first (0: none or not worth it).
func fieldArg(name string, n int) int {
	switch name {
	case "hset", "hsetnx", "hget", "hexists", "hincrby", "hincrbyfloat", "hmset", "hmget", "hdel", "hstrlen",
		"sadd", "srem", "sismember", "smismember", "zscore", "zrem", "zrank", "zrevrank", "zmscore":
		return 2
	case "zincrby":
		return 3
	case "zadd":
		return n - 1 // the last pair's member (ZADD key [opts] score member ...)
	}
	return 0
}

// walkRefs follows every ref's table path in passes, as pDict.find
// would: the bucket slots, then each chain one entry per pass (its hash
// and next pointer) until every chain is done; while a table grows, the
// keys not found in the old table are then looked for in the new one the
// same way. Last, the found entries' key and value bytes. It returns a
// sum of what it read, so the loads are not dropped.
func walkRefs(refs []warmRef) uint64 {
	for i := range refs {
		ref := &refs[i]
		tab := ref.d.T0
		if ref.d.RehashIdx >= 0 && int64(ref.h&uint64(len(tab)-1)) < ref.d.RehashIdx {
			tab, ref.inNew = ref.d.T1, true // already moved
		}
		ref.e = tab[ref.h&uint64(len(tab)-1)]
	}
	walkChains(refs)
	more := false
	for i := range refs {
		ref := &refs[i]
		if !ref.found && !ref.inNew && ref.d.RehashIdx >= 0 {
			tab := ref.d.T1
			ref.e, ref.inNew, more = tab[ref.h&uint64(len(tab)-1)], true, true
		}
	}
	if more {
		walkChains(refs)
	}
	var sink uint64
	for i := range refs {
		ref := &refs[i]
		if !ref.found {
			continue
		}
		if k := ref.e.key(); len(k) > 0 {
			sink += uint64(k[0])
		}
		if v := ref.e.val(); len(v) > 0 {
			sink += uint64(v[0])
		}
	}
	return sink
}

// walkChains advances every unfinished ref one chain entry per pass until
// each has found its hash or reached the chain's end.
func walkChains(refs []warmRef) {
	for moved := true; moved; {
		moved = false
		for i := range refs {
			ref := &refs[i]
			if ref.found || ref.e == nil {
				continue
			}
			if ref.e.Hash == ref.h {
				ref.found = true
				continue
			}
			ref.e, moved = ref.e.Next, true
		}
	}
}
