// pcoll.go: the persistent collection structures a key may point to
// (pEntry.Coll), and the whole-value paths every type shares: load a
// collection into Go values, replace it as a whole, drop it.
//
//   - list: a quicklist, a doubly linked list of chunks (plist.go), always;
//   - hash, set: the compact encoding as the entry's value (pEntry.val(); codec.go: Redis's
//     listpack / intset) while small, then a chained hash table (a pDict
//     whose entries hold field and value: phash.go) once a write makes it
//     exceed Redis 7.0's thresholds; it stays a table afterwards, as in Redis;
//   - sorted set: compact while small, then a skiplist with spans plus a
//     member -> node table (pzset.go, pztable.go).
//
// Invariants: an entry of a collection type has either a compact Val and a
// nil Coll, or a Coll and a nil Val; every change to a Coll is logged in
// the command's region before it is made, so a write costs O(1) (list
// ends, hash and set fields) or O(log n) (sorted sets) logged bytes.
//
// Crash behaviour: structures change only inside the executor's region, so
// a crash shows each one before or after a whole batch. A big collection
// that is dropped is left to the pool's collector (gcGen), not freed
// element by element.
package redis

import (
	"sync/atomic"

	engram "github.com/engram-pm/engram-go"
)

// pColl is one persistent collection; which fields are used depends on
// the entry's type.
type pColl struct {
	Head, Tail *pLNode // list: the chunks
	Len        int64   // list: elements; sorted set: skiplist length
	Dict       *pDict  // hash, set: field table
	ZHead      *pZNode // sorted set: the skiplist's header node
	ZTail      *pZNode // nil: unused since pool layout version 4 (pzset.go)
	ZLevel     int64
	ZDict      *pZDict // sorted set: member table, chained through the nodes (pztable.go)
}

// limits are the conversion thresholds (CONFIG SET hash-max-listpack-entries
// etc.); defaultLimits are those of redis-server 7.0.15 (CONFIG GET).
type limits struct {
	hashEntries, hashValue, setInts, zsetEntries, zsetValue int64
}

var defaultLimits = limits{hashEntries: 512, hashValue: 64, setInts: 512, zsetEntries: 128, zsetValue: 64}

// limitNames maps the CONFIG names (and the old ziplist aliases) to fields.
func (l *limits) field(name string) *int64 {
	switch name {
	case "hash-max-listpack-entries", "hash-max-ziplist-entries":
		return &l.hashEntries
	case "hash-max-listpack-value", "hash-max-ziplist-value":
		return &l.hashValue
	case "set-max-intset-entries":
		return &l.setInts
	case "zset-max-listpack-entries", "zset-max-ziplist-entries":
		return &l.zsetEntries
	case "zset-max-listpack-value", "zset-max-ziplist-value":
		return &l.zsetValue
	}
	return nil
}

var limitNames = []string{"hash-max-listpack-entries", "hash-max-listpack-value", "set-max-intset-entries", "zset-max-listpack-entries", "zset-max-listpack-value",
	"hash-max-ziplist-entries", "hash-max-ziplist-value", "zset-max-ziplist-entries", "zset-max-ziplist-value"}

// freeLimit: a dropped collection with more elements is left to the pool's
// collector instead of being freed one object at a time.
const freeLimit = 1024

// gcGen counts drops left to the collector; each server collects when it
// changed since its last look.
var gcGen atomic.Int64

// collLen is the number of elements of a collection entry.
func collLen(e *pEntry) int64 {
	if e.Coll == nil {
		if e.Type == tZSet {
			return listLen(e.val())
		}
		n := listLen(e.val())
		if e.Type == tHash {
			n /= 2
		}
		return n
	}
	if e.Type == tList || e.Type == tZSet {
		return e.Coll.Len
	}
	return e.Coll.Dict.Used
}

// dropColl detaches e's collection (if any) and frees it, or leaves a big
// one to the collector.
func dropColl(tx *engram.Tx, e *pEntry) error {
	c := e.Coll
	if c == nil {
		return nil
	}
	if err := tx.Log(&e.Coll); err != nil {
		return err
	}
	e.Coll = nil
	if collLen(&pEntry{Type: e.Type, Coll: c}) > freeLimit {
		gcGen.Add(1)
		return nil
	}
	return freeColl(tx, e.Type, c)
}

func freeColl(tx *engram.Tx, t int64, c *pColl) error {
	var err error
	switch t {
	case tList:
		for n := c.Head; n != nil && err == nil; {
			next := n.Next
			err = freeLNode(tx, n)
			n = next
		}
	case tZSet:
		return freeZColl(tx, c)
	}
	if err == nil && c.Dict != nil {
		err = freeDict(tx, c.Dict)
	}
	if err != nil {
		return err
	}
	return tx.Free(c)
}

// freeDict frees a table and every entry in it.
func freeDict(tx *engram.Tx, d *pDict) error {
	var err error
	d.each(func(e *pEntry) bool {
		err = freeEntry(tx, e)
		return err == nil
	})
	for _, t := range [][]*pEntry{d.T0, d.T1} {
		if err == nil && cap(t) > 0 {
			err = tx.Free(t)
		}
	}
	if err != nil {
		return err
	}
	return tx.Free(d)
}

// ---- loading a whole collection into Go values

func loadList(e *pEntry) [][]byte {
	if e.Coll == nil {
		return decodeList(e.val())
	}
	return e.Coll.lall()
}

func loadHash(e *pEntry) *hashv {
	if e.Coll == nil {
		return decodeHash(e.val())
	}
	h := newHash()
	e.Coll.Dict.each(func(f *pEntry) bool {
		h.set(string(f.key()), append([]byte(nil), f.val()...))
		return true
	})
	return h
}

func loadSet(e *pEntry) *hashv {
	if e.Coll == nil {
		return decodeSet(e.val())
	}
	h := newHash()
	e.Coll.Dict.each(func(f *pEntry) bool {
		h.set(string(f.key()), nil)
		return true
	})
	return h
}

func loadZSet(e *pEntry) *zsetv {
	if e.Coll == nil {
		return decodeZSet(e.val())
	}
	z := &zsetv{scores: map[string]float64{}}
	for n := e.Coll.ZHead.lv(0).Fwd; n != nil; n = n.lv(0).Fwd {
		z.els = append(z.els, zel{n.Score, string(n.member())})
		z.scores[string(n.member())] = n.Score
	}
	return z
}

// loadAny is the Go value of any entry (strings: a copy of the bytes).
func loadAny(e *pEntry) any {
	switch e.Type {
	case tList:
		return loadList(e)
	case tHash:
		return loadHash(e)
	case tSet:
		return loadSet(e)
	case tZSet:
		return loadZSet(e)
	}
	return append([]byte(nil), e.val()...)
}

// ---- replacing a whole collection

// writeValue makes v (a string's []byte, a list's [][]byte, a hash's or
// set's *hashv, a sorted set's *zsetv) e's value, in the representation
// its size calls for.
func writeValue(tx *engram.Tx, lim *limits, e *pEntry, t int64, v any) error {
	return writeValueAs(tx, lim, e, t, v, false)
}

// writeValueAs is writeValue; big forces the persistent structure (a COPY
// keeps its source's encoding, as in Redis).
func writeValueAs(tx *engram.Tx, lim *limits, e *pEntry, t int64, v any, big bool) error {
	if t == tString {
		return setVal(tx, e, t, v.([]byte))
	}
	if t != tList && !big {
		if enc, ok := compactOf(lim, t, v); ok {
			return setVal(tx, e, t, enc)
		}
	}
	if err := setVal(tx, e, t, nil); err != nil {
		return err
	}
	c, err := buildColl(tx, t, v)
	if err != nil {
		return err
	}
	if err := tx.Log(&e.Coll); err != nil {
		return err
	}
	e.Coll = c
	return nil
}

// toColl stores the compact value v of k (e: its entry, nil if the key is
// new; it is created) as its persistent structure now, before a write
// that passes Redis's conversion threshold, and returns the entry: the
// write then goes into the structure directly, so its bytes reach the
// pool once instead of through the compact value's Go form.
func (x *ctx) toColl(k []byte, t int64, e *pEntry, v any) (*pEntry, error) {
	if e == nil {
		ne, err := x.put(k, t, nil, false)
		if err != nil {
			return nil, err
		}
		e = ne
	}
	return e, writeValueAs(x.tx, &x.s.lim, e, t, v, true)
}

// compactOf is v's compact encoding if Redis would keep it compact.
func compactOf(lim *limits, t int64, v any) ([]byte, bool) {
	switch t {
	case tHash:
		h := v.(*hashv)
		if !hashSmall(lim, h) {
			return nil, false
		}
		return h.encode(), true
	case tSet:
		h := v.(*hashv)
		if !setSmall(lim, h) {
			return nil, false
		}
		sortIntset(h)
		return h.encodeSet(), true
	case tZSet:
		z := v.(*zsetv)
		if !zsetSmall(lim, z) {
			return nil, false
		}
		return z.encode(), true
	}
	return nil, false
}

func hashSmall(lim *limits, h *hashv) bool {
	if int64(len(h.keys)) > lim.hashEntries {
		return false
	}
	for _, k := range h.keys {
		if int64(len(k)) > lim.hashValue || int64(len(h.vals[k])) > lim.hashValue {
			return false
		}
	}
	return true
}

func setSmall(lim *limits, h *hashv) bool {
	if int64(len(h.keys)) > lim.setInts {
		return false
	}
	for _, k := range h.keys {
		if _, ok := parseInt([]byte(k)); !ok {
			return false
		}
	}
	return true
}

func zsetSmall(lim *limits, z *zsetv) bool {
	if int64(len(z.els)) > lim.zsetEntries {
		return false
	}
	for _, el := range z.els {
		if int64(len(el.member)) > lim.zsetValue {
			return false
		}
	}
	return true
}

// buildColl builds the persistent structure of a collection value.
func buildColl(tx *engram.Tx, t int64, v any) (*pColl, error) {
	switch t {
	case tList:
		return buildList(tx, v.([][]byte))
	case tZSet:
		c, err := newZColl(tx)
		if err != nil {
			return nil, err
		}
		for _, el := range v.(*zsetv).els {
			if _, err := c.zadd(tx, []byte(el.member), el.score); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	c, err := newDictColl(tx)
	if err != nil {
		return nil, err
	}
	h := v.(*hashv)
	for _, k := range h.keys {
		if _, err := c.hset(tx, []byte(k), h.vals[k]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// encodingName is OBJECT ENCODING for a collection entry.
func encodingName(e *pEntry) string {
	switch {
	case e.Type == tList:
		return "quicklist"
	case e.Coll != nil && e.Type == tZSet:
		return "skiplist"
	case e.Coll != nil:
		return "hashtable"
	case e.Type == tSet:
		return "intset"
	}
	return "listpack"
}
