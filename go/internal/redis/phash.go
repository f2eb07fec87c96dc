// phash.go: the persistent hash table of big hashes and sets: a pDict
// (store.go, with incremental rehash) whose entries hold a field and its
// value (empty for sets). A field that fits inlineCap bytes gets an inline
// entry (entry.go: the field, and the value when it fits after it, in the
// entry's one pool object; pool layout version 8); a longer field a plain
// entry with arrays of its own. A field's value is written as a key's is
// (storeVal: inline, over a short old value's bytes, or a new array):
// O(1) logged bytes either way.
//
// Also hobj, the view the hash and set commands work through: the compact
// encoding decoded into Go values while the value is small (written back
// as a whole, and converted to a table when Redis would convert it), or
// the table itself, changed in place.
//
// Crash behaviour: every change is logged in the executor's region first.
package redis

import (
	"sort"
	"strconv"

	engram "github.com/engram-pm/engram-go"
)

func newDictColl(tx *engram.Tx) (*pColl, error) {
	c, err := engram.New[pColl](tx)
	if err != nil {
		return nil, err
	}
	c.Dict, err = newDict(tx)
	return c, err
}

func (c *pColl) hget(f []byte) ([]byte, bool) {
	_, e := c.Dict.find(f, hashKey(f))
	if e == nil {
		return nil, false
	}
	return e.val(), true
}

// hset sets field f to v; true if the field is new. A new field is one
// allocation when it fits an inline entry (newEntry). A value equal to the
// field's writes nothing (storesNothing: no log, no fence: the pool
// already holds what the command asks for, durably once this region
// commits); another goes where storeVal puts a key's value: into the
// inline bytes when it fits (one log batch), over a short old value's
// bytes (one log batch), or into a new array (the entry logged, the old
// array freed at commit).
func (c *pColl) hset(tx *engram.Tx, f, v []byte) (bool, error) {
	_, e := c.Dict.find(f, hashKey(f))
	if e == nil {
		_, err := c.Dict.add(tx, f, 0, v)
		return true, err
	}
	return false, storeVal(tx, e, 0, v, false)
}

// sortIntset orders a small set's members numerically (Redis's intset
// replies in that order).
func sortIntset(h *hashv) {
	num := func(k string) int64 { n, _ := strconv.ParseInt(k, 10, 64); return n }
	sort.SliceStable(h.keys, func(i, j int) bool { return num(h.keys[i]) < num(h.keys[j]) })
	for i, k := range h.keys {
		h.index[k] = i
	}
}

// hobj is a hash or set as the commands see it.
type hobj struct {
	x     *ctx
	k     []byte
	t     int64
	e     *pEntry // nil: the key does not exist (yet)
	h     *hashv  // compact (or new) value
	c     *pColl  // table
	dirty bool
}

// hashObj looks up k as a hash or set; ok is false on a wrong type (the
// error is replied).
func (x *ctx) hashObj(k []byte, t int64) (*hobj, bool, error) {
	e, wrong, err := x.typed(k, t)
	if err != nil || wrong {
		return nil, false, err
	}
	o := &x.hob
	if x.hobUsed {
		o = new(hobj)
	}
	x.hobUsed = true
	*o = hobj{x: x, k: k, t: t, e: e}
	switch {
	case e == nil:
		o.h = newHash()
	case e.Coll != nil:
		o.c = e.Coll
	case t == tSet:
		o.h = decodeSet(e.val())
	default:
		o.h = decodeHash(e.val())
	}
	return o, true, nil
}

func (o *hobj) n() int {
	if o.c != nil {
		return int(o.c.Dict.Used)
	}
	return o.h.n()
}

func (o *hobj) get(f []byte) ([]byte, bool) {
	if o.c != nil {
		return o.c.hget(f)
	}
	v, ok := o.h.vals[string(f)]
	return v, ok
}

func (o *hobj) has(f []byte) bool { _, ok := o.get(f); return ok }

// set sets f to v; true if f is new. A field or value the compact
// encoding cannot hold turns the value into its table first (what done
// would do at the command's end), so that its bytes go into the pool
// once, never through a Go copy (docs/redis.md, "Large values").
func (o *hobj) set(f, v []byte) (bool, error) {
	o.dirty = true
	if o.c == nil && !o.fitsCompact(f, v) {
		if err := o.toTable(); err != nil {
			return false, err
		}
	}
	if o.c != nil {
		return o.c.hset(o.x.tx, f, v)
	}
	return o.h.set(string(f), append([]byte(nil), v...)), nil
}

// fitsCompact is whether field f with value v leaves the value compact
// (hashSmall, setSmall: a long field or value, or a set member that is not
// an integer, makes Redis convert it).
func (o *hobj) fitsCompact(f, v []byte) bool {
	if o.t == tSet {
		_, ok := parseInt(f)
		return ok
	}
	lim := &o.x.s.lim
	return int64(len(f)) <= lim.hashValue && int64(len(v)) <= lim.hashValue
}

// toTable stores the compact value as its table now (toColl); the fields
// to come are written into the table directly.
func (o *hobj) toTable() error {
	e, err := o.x.toColl(o.k, o.t, o.e, o.h)
	if err != nil {
		return err
	}
	o.e, o.c, o.h = e, e.Coll, nil
	return nil
}

func (o *hobj) del(f []byte) (bool, error) {
	if o.c != nil {
		ok, err := o.c.Dict.remove(o.x.tx, f)
		o.dirty = o.dirty || ok
		return ok, err
	}
	ok := o.h.del(string(f))
	o.dirty = o.dirty || ok
	return ok, nil
}

// each calls fn for every field (table order or insertion order).
func (o *hobj) each(fn func(f, v []byte)) {
	if o.c != nil {
		o.c.Dict.each(func(e *pEntry) bool { fn(e.key(), e.val()); return true })
		return
	}
	for _, k := range o.h.keys {
		fn([]byte(k), o.h.vals[k])
	}
}

func (o *hobj) keys() []string {
	if o.c == nil {
		return append([]string(nil), o.h.keys...)
	}
	out := make([]string, 0, o.n())
	o.each(func(f, _ []byte) { out = append(out, string(f)) })
	return out
}

// done writes a changed value back: deletes an emptied key, converts a
// compact value that grew past Redis's thresholds into a table.
func (o *hobj) done() error {
	if !o.dirty {
		return nil
	}
	o.dirty = false
	return o.x.finish(o.k, o.t, o.e, o.n(), o.c != nil, o.h)
}

// finish ends a write to a hash, set or sorted set view: an emptied key
// is deleted; a table/skiplist (changed in place) only marks the key
// changed; a compact value v is stored (store converts it if it grew).
func (x *ctx) finish(k []byte, t int64, e *pEntry, n int, inPlace bool, v any) error {
	switch {
	case n == 0 && e == nil:
		return nil
	case n == 0:
		x.touch(k)
		_, err := x.dict().remove(x.tx, k)
		return err
	case inPlace:
		x.touch(k)
		if t == tZSet {
			x.markReady(k) // BZPOP* waiters
		}
		return nil
	}
	return x.store(k, t, e, v, false)
}
