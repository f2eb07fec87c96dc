// prelog.go: logging ahead. Before a client's pipeline runs (or, at
// pipeline 1, a batch's lone commands: warm.go, warmLone), the undo
// log takes, in one engine call and one fence, what its string writes
// (SET, INCR, MSET, ...) will most likely change: each existing string
// key's entry and its short value's bytes, and for an absent key the
// bucket slot it will be linked into and the table's entry count; and
// what its ZADDs moving a member of a big sorted set will (zwarm.go,
// zprelog: the links on both paths, the node's score and levels); what
// its HSETs of a big hash's field will (the field's link, or its short
// value's bytes); and, for a table it adds to while the table grows (a
// sorted set's member table: each write of a member steps it, zwarm.go's
// appendZRehash), the bucket moves of the rehash steps those writes
// take. Each
// command still logs what it changes before changing it, but the engine
// then finds the range logged already and fences no more: a pipeline of
// 16 INCRs takes one undo fence instead of 16 (perf put the per-write
// fence at ~13 % of INCR's server CPU at pipeline 16 in pmem mode), and
// in wal mode one recording into the log's batch instead of 16.
//
// Invariants: a pre-logged range is a guess, never relied upon: the
// commands' own log calls are unchanged, so a wrong or missing guess
// costs an undo entry or a fence and nothing else. Every range lies
// inside one live pool object (the engine refuses others): an entry, a
// string value's array from its start (see valWords), a bucket array
// slot, a table header, a skiplist node's score and levels (found by
// walking the list before any command of the pipeline runs). Objects
// freed later in the region stay allocated until it commits, so a range
// logged here stays valid.
//
// Crash behaviour: the undo entries written here restore, on a rollback
// or after a crash before the region's commit, bytes the region may or
// may not have changed; restoring an unchanged range is a no-op. Nothing
// is written to the ranges themselves here.
package redis

import (
	"math"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

// prelogCmds are the commands whose keys are pre-logged: they write a
// string value under each key they name (the command table's key
// positions), in place when the old value's bytes can take it.
var prelogCmds = map[string]bool{
	"set": true, "getset": true, "setex": true, "psetex": true,
	"incr": true, "decr": true, "incrby": true, "decrby": true, "incrbyfloat": true,
	"mset": true,
}

// prelogMax bounds the ranges pre-logged per pipeline (two per key).
const prelogMax = 2 * warmMax

// prelog logs ahead, in one engine call, what the string writes of refs
// (walked by walkRefs; pre marks a string write's key) and the moves of
// the ZADDs on a big sorted set (zprelog, zwarm.go: it warms their walks
// and guesses from them) will change.
func (s *Server) prelog(tx *engram.Tx, refs []warmRef) error {
	pairs := s.prelogBuf[:0]
	var adds dictAdds
	for i := range refs {
		ref := &refs[i]
		if !ref.pre || len(pairs) >= prelogMax {
			continue
		}
		pairs = appendPrelog(pairs, ref)
		if !ref.found {
			adds.add(ref.d)
		}
	}
	pairs = adds.appendRehash(pairs)
	var sink uint64
	s.zhints.reset()
	pairs, sink = zprelog(pairs, refs, &s.zhints, &s.zbuf)
	s.warmSink += sink
	s.prelogBuf = pairs[:0]
	if len(pairs) == 0 {
		return nil // nothing to log (a read-only batch has no region: readonly.go)
	}
	return tx.LogRanges(pairs)
}

// appendPrelog adds the ranges a string write of ref's key, or HSET's
// write of a big hash's field (ref.c set: a field's ref, its guess the
// value), changes: for an existing string or field, its value's bytes if
// short (an overwrite's) and its entry unless the write is likely to
// leave the entry as it is (entryKept: an overwrite by a value of the same
// length, no TTL to clear, writes only the value bytes, in its own array
// or inline: entry.go), nothing if the value is the one the key or field
// holds (storesNothing: store.go); for an absent key or field, its
// insertion slot and the table's count (what pDict.add and addMany log,
// unless a rehash starts first). A field is written as a key's string
// (phash.go's hset: storeVal) but of type 0 and with no TTL to clear.
func appendPrelog(pairs []uint64, ref *warmRef) []uint64 {
	if !ref.found {
		return appendLinkPrelog(pairs, ref)
	}
	typ, clearTTL := tString, true
	if ref.c != nil {
		typ, clearTTL = 0, false
	}
	e := ref.e
	if e.Type != typ || e.Coll != nil {
		return pairs
	}
	if ref.guess.kind == guessValue && storesNothing(e, typ, ref.guess.val, clearTTL) {
		return pairs // the key holds the value already: the write changes nothing
	}
	n := guessLen(e, ref.guess)
	if !entryKept(e, ref.guess, n) {
		pairs = append(pairs, addrOf(e), uint64(unsafe.Sizeof(*e)))
	}
	if e.valInline() { // the inline bytes after the key (entry.go's storeInline)
		if o := valOff(int(e.KeyIn)); o < int(e.InCap) && !plantUnloggedInline {
			pairs = append(pairs, addrOf(&e.inBytes()[o]), inlineWords(int(e.InCap)-o, n))
		}
		return pairs
	}
	if n := cap(e.Val); n > 0 && n <= overwriteMax {
		pairs = append(pairs, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(e.Val)))), valWords(n))
	}
	return pairs
}

// appendLinkPrelog adds what linking ref's absent key (or field) into
// its table changes: its insertion slot and the table's count (pDict.add's
// logLink and addMany's batch, unless a rehash starts first).
func appendLinkPrelog(pairs []uint64, ref *warmRef) []uint64 {
	return append(pairs, addrOf(ref.d.insertSlot(ref.h)), 8, addrOf(&ref.d.Used), 8)
}

// dictAdds counts the adds a batch's refs guess per table (an absent key
// or field written): each add takes one rehash step of its table first
// (pDict.prepareAdd). A handful of tables at most (db 0's keys, a hash's
// fields); adds to further tables are not counted.
type dictAdds struct {
	d [4]*pDict
	n [4]int
}

func (a *dictAdds) add(d *pDict) {
	for i := range a.d {
		if a.d[i] == nil {
			a.d[i] = d
		}
		if a.d[i] == d {
			a.n[i]++
			return
		}
	}
}

// appendRehash adds what each counted table's next rehash steps log
// (appendRehashPrelog), for the tables that are growing.
func (a *dictAdds) appendRehash(pairs []uint64) []uint64 {
	for i, d := range a.d {
		if d != nil && d.RehashIdx >= 0 {
			pairs = appendRehashPrelog[pEntry](pairs, d, a.n[i])
		}
	}
	return pairs
}

// plantMoveUnlogged is for the crash explorer's planted-fault test only:
// a table's bucket move (pDict.moveBucket) trusts what was logged ahead
// and logs nothing itself.
var plantMoveUnlogged bool

// growingTable is a hash table whose rehash steps are logged ahead
// (appendRehashPrelog): the keyspace's and a hash's or set's (pDict, of
// entries E = pEntry) or a sorted set's members (pZDict, of nodes E =
// pZNode). Both step alike (rehashStep: rehashFrom's bucket moved,
// moveLinks' links logged, RehashIdx, the header at the end). engramvet
// checks appendRehashPrelog's calls of these methods once per member type
// (a finite type set: docs/engramvet.md).
type growingTable[E any] interface {
	*pDict | *pZDict
	rehashFrom(i int64) int64
	moveLinks(i int64, f func(**E))
	rehashState() (idx *int64, buckets int64, header uint64, size uint64)
}

func (d *pDict) rehashState() (*int64, int64, uint64, uint64) {
	return &d.RehashIdx, int64(len(d.T0)), addrOf(d), uint64(unsafe.Sizeof(*d))
}

func (d *pZDict) rehashState() (*int64, int64, uint64, uint64) {
	return &d.RehashIdx, int64(len(d.T0)), addrOf(d), uint64(unsafe.Sizeof(*d))
}

// appendRehashPrelog adds what k rehash steps of d (growing: RehashIdx >=
// 0) will log, walking T0 from RehashIdx as rehashStep will, with its
// rules: RehashIdx; for each bucket moved (rehashFrom: after up to 10
// empty ones skipped) the links moveBucket logs (moveLinks); d itself if
// the last bucket moves (finishRehash).
// A batch's adds (and a sorted set's moves) then take no engine call or
// fence for their table's steps while the guesses hold: the entries moved
// are those in T0 now, unless a command before removes one.
func appendRehashPrelog[E any, D growingTable[E]](pairs []uint64, d D, k int) []uint64 {
	idx, n0, hdr, size := d.rehashState()
	pairs = append(pairs, addrOf(idx), 8)
	i := *idx
	for ; k > 0 && len(pairs) < prelogMax; k-- {
		if i = d.rehashFrom(i); i < n0 {
			d.moveLinks(i, func(p **E) { pairs = append(pairs, addrOf(p), 8) })
			i++
		}
		if i >= n0 {
			return append(pairs, hdr, size)
		}
	}
	return pairs
}

// valGuess is what a pipeline's string write will likely store under its
// key, as far as warming can tell from the command's arguments: nothing
// (kind guessNone), a value given as an argument (guessValue: SET k v,
// GETSET, MSET), or the key's integer plus by (guessIncr: INCR, DECR,
// INCRBY, DECRBY). A guess only decides what is logged ahead.
type valGuess struct {
	kind uint8
	val  []byte // guessValue's value
	by   int64  // guessIncr's increment
}

const (
	guessNone = iota
	guessValue
	guessIncr
)

// guessValueOf is the valGuess of the string write name at key position
// i of args (a SET with options, SETEX, PSETEX and INCRBYFLOAT: none:
// they change the TTL or format their value in ways not worth guessing).
func guessValueOf(name string, args [][]byte, i int) valGuess {
	switch name {
	case "set", "getset":
		if len(args) == 3 {
			return valGuess{kind: guessValue, val: args[2]}
		}
	case "mset":
		if i+1 < len(args) {
			return valGuess{kind: guessValue, val: args[i+1]}
		}
	case "incr":
		return valGuess{kind: guessIncr, by: 1}
	case "decr":
		return valGuess{kind: guessIncr, by: -1}
	case "incrby", "decrby":
		if len(args) != 3 {
			break
		}
		by, ok := parseInt(args[2])
		if !ok || (name == "decrby" && by == math.MinInt64) {
			break
		}
		if name == "decrby" {
			by = -by
		}
		return valGuess{kind: guessIncr, by: by}
	}
	return valGuess{}
}

// inlineWords is the logged length of an inline value's bytes (room
// bytes after the key) for a write of n bytes (guessLen; -1: unknown):
// the words the value will take (storeInline logs its n bytes from the
// same start, so the Tx finds them logged ahead), else the whole room.
// An INCR's counter is one word, not the room's four: an undo entry of
// 32 bytes instead of 56 (the engine's 24-byte header and the data).
func inlineWords(room, n int) uint64 {
	if n <= 0 || n > room {
		return valWords(room)
	}
	return valWords(n)
}

// entryKept is whether the write g guesses, of n bytes (guessLen), leaves
// entry e (a string's) unchanged: it overwrites e's value bytes with as
// many bytes (its length and capacity stay: overwriteVal writes the
// header only if they change) and e has no TTL to clear (SET and MSET
// clear it; INCR keeps it).
func entryKept(e *pEntry, g valGuess, n int) bool {
	if v := e.val(); n <= 0 || n != len(v) || n != cap(v) {
		return false
	}
	return g.kind == guessIncr || e.Expire == 0
}

// guessLen is the length of the value g stores over e's (-1: unknown).
func guessLen(e *pEntry, g valGuess) int {
	switch g.kind {
	case guessValue:
		return len(g.val)
	case guessIncr:
		cur, ok := parseInt(e.val())
		if !ok || (g.by > 0 && cur > math.MaxInt64-g.by) || (g.by < 0 && cur < math.MinInt64-g.by) {
			return -1
		}
		return decimalLen(cur + g.by)
	}
	return -1
}

// decimalLen is len(strconv.AppendInt(nil, v, 10)), without writing it.
func decimalLen(v int64) int {
	n, u := 1, uint64(v)
	if v < 0 {
		n, u = 2, -u
	}
	for ; u >= 10; u /= 10 {
		n++
	}
	return n
}

// valWords is the logged length of a string value of capacity n: whole
// 8-byte words, since the engine counts a range as logged by the words
// it covers (a 5-byte range is no word and would be logged again). A
// keyspace string's Val starts its own pool array (Bytes, storeVal,
// overwriteVal keep that), whose payload is a multiple of 16 bytes of
// at least n, so the rounded range stays inside it.
func valWords(n int) uint64 { return uint64(n+7) &^ 7 }

func addrOf[T any](p *T) uint64 { return uint64(uintptr(unsafe.Pointer(p))) }
