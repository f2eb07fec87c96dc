// store.go: the keyspace in the pool. One root ("engram-redis") holds 16
// databases; each is a chained hash table with incremental rehash (as
// Redis's dict: two tables while growing, one bucket moved per write).
// An entry holds its key, its type, its expiry and its value: bytes
// (strings raw, small collections in the compact encoding of codec.go),
// inline in a keyspace entry when key and value fit (entry.go), else a
// pool byte array, or a persistent structure (pcoll.go). A short value is
// written in the entry's inline bytes when it fits, else over the old
// value's bytes when they are long enough (canOverwrite), a longer one
// into a new array.
//
// Invariants: every store into pool memory happens inside the executor's
// current transaction and is preceded by tx.Log of what it overwrites
// (fresh objects from New/Make/Bytes need no log); a key is in exactly one
// of the two tables; Used counts the entries of both.
//
// Crash behaviour: each transaction is one failure-atomic region, so a
// crash leaves every table either before or after a whole command batch.
package redis

import (
	"math/bits"

	engram "github.com/engram-pm/engram-go"
)

const numDBs = 16

// Value types.
const (
	tString int64 = iota
	tList
	tHash
	tSet
	tZSet
)

var typeNames = [...]string{"string", "list", "hash", "set", "zset"}

type pRoot struct {
	DBs [numDBs]*pDict
}

type pDict struct {
	T0, T1    []*pEntry
	Used      int64
	RehashIdx int64 // -1: not rehashing
}

// pEntry is a key's (or a big hash's field's) entry. Read its key and
// value through key() and val(): a keyspace entry keeps them inline
// (entry.go) when they fit, and then Key and Val are empty.
type pEntry struct {
	Next   *pEntry
	Key    []byte // the key's own array; empty when the key is inline
	Val    []byte // the value's own array; empty when the value is inline
	Type   int64
	Expire int64 // unix ms; 0: none (a sorted set's member: the score's bits)
	Hash   uint64
	Coll   *pColl // a big collection (pcoll.go); nil for strings and compact values
	KeyIn  uint16 // an inline entry's key length (entry.go)
	ValIn  uint16 // an inline value's length (when Val has no array)
	InCap  uint16 // the inline bytes after the entry (0: a plain entry)
	_      uint16
}

// hashKey is the hash of keys, fields and members, read 8 bytes at a
// time (fixed, so bucket positions survive restarts; pool layout version
// 8: FNV-1a a byte at a time before, ~5x the instructions for a 20-byte
// field). The length seeds it; each word is folded in by hashMix, a
// 64x64->128-bit multiply whose halves are xored, so every input bit
// reaches the low bits a table's index takes. The last 1-8 bytes are read
// as one word ending at the key's end (overlapping the word before: the
// length tells the keys apart), a key under 8 bytes in two overlapping
// 4-byte reads or, under 4, its first, middle and last bytes (wyhash's
// reads); two more folds end it (with one, 100,000 keys "key:%012d" took
// 6 % more colliding pairs in 2^17 buckets than random ones would; with
// two, as many as random, as FNV-1a's did).
//
// Not inlined: inlined into a bigger function (appendKeyRefs, lookupDB)
// the compiler kept the state on the stack (perf, with FNV-1a: ~2.5x
// the cycles of the loop on its own).
//
//go:noinline
func hashKey(k []byte) uint64 {
	n := len(k)
	h := hashSeed ^ uint64(n)*hashLenMul
	switch {
	case n > 8:
		for i := 0; i < n-8; i += 8 {
			h = hashMix(h ^ le64(k[i:]))
		}
		h ^= le64(k[n-8:])
	case n >= 4:
		h ^= uint64(le32(k))<<32 | uint64(le32(k[n-4:]))
	case n > 0:
		h ^= uint64(k[0])<<16 | uint64(k[n>>1])<<8 | uint64(k[n-1])
	}
	return hashMix(hashMix(h) ^ hashSeed)
}

const (
	hashSeed   = 0x9e3779b97f4a7c15
	hashLenMul = 0xc2b2ae3d27d4eb4f
	hashMul    = 0xbf58476d1ce4e5b9
)

// le64 and le32 read b's first 8 or 4 bytes as a little-endian word (one
// load each: the compiler merges the bytes' loads), as encoding/binary's
// do; kept here because engramvet cannot see that a call outside the
// module only reads the pool bytes it is given.
func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// hashMix folds x's 128-bit product by an odd constant into 64 bits.
func hashMix(x uint64) uint64 {
	hi, lo := bits.Mul64(x, hashMul)
	return hi ^ lo
}

const initialBuckets = 16

func newDict(tx *engram.Tx) (*pDict, error) {
	d, err := engram.New[pDict](tx)
	if err != nil {
		return nil, err
	}
	if d.T0, err = engram.Make[*pEntry](tx, initialBuckets, initialBuckets); err != nil {
		return nil, err
	}
	d.RehashIdx = -1
	return d, nil
}

func openRoot(tx *engram.Tx, pool *engram.Pool) (*pRoot, error) {
	r, err := engram.Root[pRoot](pool, rootName)
	if err == nil && r != nil {
		return r, nil
	}
	r, err = engram.New[pRoot](tx)
	if err != nil {
		return nil, err
	}
	for i := range r.DBs {
		if r.DBs[i], err = newDict(tx); err != nil {
			return nil, err
		}
	}
	return r, engram.SetRoot(tx, rootName, r)
}

const rootName = "engram-redis"

// slotFor returns the bucket slot of key in the table that holds it now.
func (d *pDict) find(k []byte, h uint64) (slot **pEntry, e *pEntry) {
	for t := 0; t < 2; t++ {
		tab := d.T0
		if t == 1 {
			if d.RehashIdx < 0 {
				break
			}
			tab = d.T1
		}
		i := h & uint64(len(tab)-1)
		if t == 0 && d.RehashIdx >= 0 && int64(i) < d.RehashIdx {
			continue // already moved to T1
		}
		slot = &tab[i]
		for e = *slot; e != nil; e = e.Next {
			if e.Hash == h && string(e.key()) == string(k) {
				return slot, e
			}
			slot = &e.Next
		}
	}
	return nil, nil
}

// insertSlot is where a new key goes: T1 while rehashing, else T0.
func (d *pDict) insertSlot(h uint64) **pEntry {
	tab := d.T0
	if d.RehashIdx >= 0 {
		tab = d.T1
	}
	return &tab[h&uint64(len(tab)-1)]
}

// rehashStep moves one bucket (and skips up to 10 empty ones).
func (d *pDict) rehashStep(tx *engram.Tx) error {
	if d.RehashIdx < 0 {
		return nil
	}
	n := int64(len(d.T0))
	i := d.rehashFrom(d.RehashIdx)
	if i < n {
		if err := d.moveBucket(tx, i); err != nil {
			return err
		}
		i++
	}
	if err := tx.Log(&d.RehashIdx); err != nil {
		return err
	}
	d.RehashIdx = i
	if i >= n {
		return d.finishRehash(tx)
	}
	return nil
}

// rehashFrom is the bucket a rehash step at i moves: i after up to 10
// empty buckets skipped (len(T0) if the skip reaches the end). The rule
// the logging ahead of a batch's adds follows too (appendRehashPrelog).
func (d *pDict) rehashFrom(i int64) int64 {
	for empty := 0; empty < 10 && i < int64(len(d.T0)) && d.T0[i] == nil; empty++ {
		i++
	}
	return i
}

// moveLinks calls f with every link that moving T0's bucket i changes:
// each chain entry's Next and its destination slot in T1, then the
// source slot (what moveBucket logs, and appendRehashPrelog ahead of it).
func (d *pDict) moveLinks(i int64, f func(**pEntry)) {
	mask := uint64(len(d.T1) - 1)
	for e := d.T0[i]; e != nil; e = e.Next {
		f(&e.Next)
		f(&d.T1[e.Hash&mask])
	}
	f(&d.T0[i])
}

func (d *pDict) moveBucket(tx *engram.Tx, i int64) error {
	src := &d.T0[i]
	// Every link the move changes, logged with one engine call and one fence.
	var b engram.LogBatch
	d.moveLinks(i, func(p **pEntry) { engram.BatchLog(tx, &b, p) })
	if plantMoveUnlogged {
		b = engram.LogBatch{} // the planted fault: trust the logging ahead (prelog.go)
	}
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	for e := *src; e != nil; {
		next := e.Next
		dst := &d.T1[e.Hash&uint64(len(d.T1)-1)]
		e.Next = *dst //engramvet:ignore this and the next line: batch-logged by moveLinks over the same chain (each Next, each destination slot)
		*dst = e
		e = next
	}
	*src = nil //engramvet:ignore batch-logged by moveLinks (the source slot, its last link)
	return nil
}

// logLink logs a bucket slot and the entry count (what linking or
// unlinking an entry changes) with one engine call.
func (d *pDict) logLink(tx *engram.Tx, slot **pEntry) error {
	var b engram.LogBatch
	engram.BatchLog(tx, &b, slot)
	engram.BatchLog(tx, &b, &d.Used)
	return tx.LogBatch(&b)
}

func (d *pDict) finishRehash(tx *engram.Tx) error {
	if err := tx.Log(d); err != nil {
		return err
	}
	old := d.T0
	d.T0, d.T1, d.RehashIdx = d.T1, nil, -1
	return tx.Free(old)
}

// maybeGrow starts a rehash into a table twice the size at load 1.
func (d *pDict) maybeGrow(tx *engram.Tx) error {
	if d.RehashIdx >= 0 || d.Used < int64(len(d.T0)) {
		return nil
	}
	n := len(d.T0) * 2
	t1, err := engram.Make[*pEntry](tx, n, n)
	if err != nil {
		return err
	}
	if err := tx.Log(d); err != nil {
		return err
	}
	d.T1, d.RehashIdx = t1, 0
	return nil
}

// add links a new entry (the key must be absent), inline when it fits
// (newEntry).
func (d *pDict) add(tx *engram.Tx, k []byte, typ int64, val []byte) (*pEntry, error) {
	if err := d.prepareAdd(tx); err != nil {
		return nil, err
	}
	e, err := newEntry(tx, k, typ, val)
	if err != nil {
		return nil, err
	}
	slot := d.insertSlot(e.Hash)
	if err := d.logLink(tx, slot); err != nil {
		return nil, err
	}
	d.linkLogged(slot, e)
	return e, nil
}

// prepareAdd is what add does before it links an entry: start growing if
// due, then one rehash step (each logged on its own), so that the tables
// do not change between insertSlot and linkLogged.
func (d *pDict) prepareAdd(tx *engram.Tx) error {
	if err := d.maybeGrow(tx); err != nil {
		return err
	}
	return d.rehashStep(tx)
}

// linkLogged links e at slot (insertSlot after prepareAdd), slot and
// Used logged by the caller (logLink, or a batch of the caller's).
func (d *pDict) linkLogged(slot **pEntry, e *pEntry) {
	e.Next = *slot
	*slot = e
	d.Used++
}

// addMany links new string entries for keys ks with values vs (every key
// absent, none twice), with one log call for all the links:
//  1. start growing if due, then take one rehash step per key (as add
//     would), so the tables do not change below;
//  2. allocate every entry, key and value (new objects need no undo);
//  3. log every insertion slot and Used in one batch (one engine call,
//     one fence);
//  4. link the entries.
//
// A crash before the region commits undoes the links and the allocations.
func (d *pDict) addMany(tx *engram.Tx, ks, vs [][]byte) error {
	if err := d.maybeGrow(tx); err != nil {
		return err
	}
	for range ks {
		if err := d.rehashStep(tx); err != nil {
			return err
		}
	}
	es := make([]*pEntry, len(ks))
	var b engram.LogBatch
	for i, k := range ks {
		e, err := newEntry(tx, k, tString, vs[i])
		if err != nil {
			return err
		}
		es[i] = e
		engram.BatchLog(tx, &b, d.insertSlot(e.Hash))
	}
	engram.BatchLog(tx, &b, &d.Used)
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	for _, e := range es {
		slot := d.insertSlot(e.Hash)
		e.Next = *slot
		*slot = e //engramvet:ignore batch-logged above: the same insertSlot(e.Hash), the tables unchanged since
	}
	d.Used += int64(len(es))
	return nil
}

// remove unlinks and frees key's entry; false if absent.
func (d *pDict) remove(tx *engram.Tx, k []byte) (bool, error) {
	if err := d.rehashStep(tx); err != nil {
		return false, err
	}
	slot, e := d.find(k, hashKey(k))
	if e == nil {
		return false, nil
	}
	if err := d.logLink(tx, slot); err != nil {
		return false, err
	}
	*slot = e.Next
	d.Used--
	return true, freeEntry(tx, e)
}

func freeEntry(tx *engram.Tx, e *pEntry) error {
	if err := dropColl(tx, e); err != nil {
		return err
	}
	for _, b := range [][]byte{e.Key, e.Val} {
		if cap(b) > 0 {
			if err := tx.Free(b); err != nil {
				return err
			}
		}
	}
	return tx.Free(e)
}

// setVal replaces an entry's value (the old array is freed at commit).
func setVal(tx *engram.Tx, e *pEntry, typ int64, val []byte) error {
	return storeVal(tx, e, typ, val, false)
}

// storeVal stores val as e's value (of type typ), in place when it fits
// (in an inline entry's bytes: entry.go; over a short old value's);
// clearTTL: the caller clears e's TTL next (setExpire), so an in-place
// write logs the entry with the value when there is one to clear (one
// log call instead of two). A value e already holds (storesNothing)
// writes nothing.
func storeVal(tx *engram.Tx, e *pEntry, typ int64, val []byte, clearTTL bool) error {
	if storesNothing(e, typ, val, clearTTL) {
		return nil
	}
	if err := dropColl(tx, e); err != nil {
		return err
	}
	if fitsInline(e, len(val)) {
		return storeInline(tx, e, typ, val, clearTTL)
	}
	if canOverwrite(e, val) {
		var b engram.LogBatch
		logOverwrite(tx, &b, e, typ, val, clearTTL)
		if err := tx.LogBatch(&b); err != nil {
			return err
		}
		overwriteVal(e, typ, val)
		return nil
	}
	nv, err := engram.Bytes(tx, val)
	if err != nil {
		return err
	}
	return replaceVal(tx, e, typ, nv)
}

// replaceVal points e at nv, a value array new in the region, and frees
// the old one at commit. The whole entry in one log (one undo record, one
// fence) rather than Val and Type apart: a later setExpire in the batch is
// then covered. An inline entry's value moves out to nv (ValIn 0: an
// empty nv, which has no array, then reads as the empty inline value).
func replaceVal(tx *engram.Tx, e *pEntry, typ int64, nv []byte) error {
	if err := tx.Log(e); err != nil {
		return err
	}
	old := e.Val
	e.Val, e.Type, e.ValIn = nv, typ, 0
	if cap(old) > 0 {
		return tx.Free(old)
	}
	return nil
}

// overwriteMax is the longest value written over the old value's pool
// bytes (when they are long enough) instead of into a new array: the
// undo log then holds the old bytes, so a large value would be copied
// twice; a short one spares an allocation and a free.
const overwriteMax = 64

// canOverwrite is whether val can be written over e's value bytes: a
// short value, and an old array of at most twice overwriteMax bytes. A
// longer old array (a long value, or a raw string's spare capacity:
// rawstr.go) is freed and the value gets its own, rather than keep, say,
// 2 MiB for a 10-byte string until the key is written again.
func canOverwrite(e *pEntry, val []byte) bool {
	return len(val) > 0 && len(val) <= overwriteMax && e.Coll == nil && cap(e.Val) >= len(val) && cap(e.Val) <= 2*overwriteMax
}

// storesNothing is whether storing val (of type typ; clearTTL: and
// clearing the TTL) over e would leave e exactly as it is: the same type,
// no collection, the same bytes in an array of exactly that length (so
// OBJECT ENCODING stays: a raw string's spare capacity would go), and no
// TTL to clear. Such a write (SET k v over v, MSET's pairs, HSET's
// fields: phash.go) logs nothing and fences nothing: the pool already
// holds what the command asks for, durably once the region commits (an
// earlier region's value was durable before its reply; a value written
// earlier in this region commits with it). The caller still touches the
// key (WATCH sees the write, as Redis's SET of the same value).
func storesNothing(e *pEntry, typ int64, val []byte, clearTTL bool) bool {
	v := e.val()
	return e.Type == typ && e.Coll == nil && len(v) == len(val) && cap(v) == len(val) &&
		(!clearTTL || e.Expire == 0) && string(v) == string(val)
}

// logOverwrite adds to b what overwriteVal changes: the value bytes it
// writes, and the entry if its header changes or clearTTL finds a TTL to
// clear (an INCR of 12 to 13 or a SET of a 3-byte value over one leaves
// the entry as it is: only the value's line is logged and, at the
// commit, flushed).
func logOverwrite(tx *engram.Tx, b *engram.LogBatch, e *pEntry, typ int64, val []byte, clearTTL bool) {
	if headerChanges(e, typ, len(val)) || (clearTTL && e.Expire != 0) {
		engram.BatchLog(tx, b, e)
	}
	engram.BatchLogSlice(tx, b, e.Val[:len(val)])
}

// headerChanges is whether overwriteVal of n bytes of type typ writes e's
// header fields (Val's length or capacity, Type).
func headerChanges(e *pEntry, typ int64, n int) bool {
	return e.Type != typ || len(e.Val) != n || cap(e.Val) != n
}

// overwriteVal writes val over e's value bytes (canOverwrite, logged by
// logOverwrite). The value's capacity becomes its length: cap > len is a
// raw string (rawstr.go). The header is written only if it changes
// (logOverwrite logs it only then).
func overwriteVal(e *pEntry, typ int64, val []byte) {
	n := len(val)
	//engramvet:ignore logged by the caller: logOverwrite (e.Val[:len(val)])
	copy(e.Val[:n], val)
	if headerChanges(e, typ, n) { //engramvet:ignore the header is logged when headerChanges (logOverwrite: e)
		e.Val, e.Type = e.Val[:n:n], typ
	}
}

func setExpire(tx *engram.Tx, e *pEntry, at int64) error {
	if e.Expire == at {
		return nil
	}
	if err := tx.Log(&e.Expire); err != nil {
		return err
	}
	e.Expire = at
	return nil
}

// each calls fn for every entry, in table order; fn returns false to stop.
func (d *pDict) each(fn func(e *pEntry) bool) {
	tabs := [][]*pEntry{d.T0}
	if d.RehashIdx >= 0 {
		tabs = append(tabs, d.T1)
	}
	for _, tab := range tabs {
		for _, b := range tab {
			for e := b; e != nil; {
				next := e.Next
				if !fn(e) {
					return
				}
				e = next
			}
		}
	}
}

// bucketCount is the scan cursor space: the larger table's size.
func (d *pDict) scanBucket(cursor uint64, fn func(e *pEntry)) uint64 {
	// Scan T0 bucket (cursor mod len) and, while rehashing, the T1 buckets
	// it expands to; reverse-binary cursor as Redis so a resize mid-scan
	// neither loses nor (much) repeats keys.
	t0 := d.T0
	small, large := t0, []*pEntry(nil)
	if d.RehashIdx >= 0 {
		large = d.T1
		if len(large) < len(small) {
			small, large = large, small
		}
	}
	visit := func(tab []*pEntry, i uint64) {
		for e := tab[i]; e != nil; e = e.Next {
			fn(e)
		}
	}
	m0 := uint64(len(small) - 1)
	visit(small, cursor&m0)
	if large != nil {
		m1 := uint64(len(large) - 1)
		for {
			visit(large, cursor&m1)
			cursor |= ^m1
			cursor = rev(cursor)
			cursor++
			cursor = rev(cursor)
			if cursor&(m0^m1) == 0 {
				break
			}
		}
		return cursor
	}
	cursor |= ^m0
	cursor = rev(cursor)
	cursor++
	return rev(cursor)
}

func rev(v uint64) uint64 {
	var r uint64
	for i := 0; i < 64; i++ {
		r = (r << 1) | (v & 1)
		v >>= 1
	}
	return r
}
