// entry.go: a new key in one allocation. A keyspace entry whose key fits
// inlineCap bytes is a pEntryIn: the entry's header (pEntry) followed by
// inlineCap bytes holding the key and, when it fits after it, the value
// (pool layout version 6, server.go). A new string key with a short value
// (redis-benchmark's 16-byte key and INCR's counter or SET's 3 bytes) is
// then one pool object, one size class (the 160-byte slot), where it took
// three (entry, key, value) and three classes. A big hash's or set's field
// entry is made the same way (phash.go; layout version 8): redis-benchmark's
// HSET field of 20 bytes and its 3-byte value are one object.
//
// Invariants:
//   - InCap > 0 exactly for a pEntryIn: its key is inline (In[:KeyIn]) and
//     Key is empty; InCap == 0 for a plain entry (a key or field longer
//     than inlineCap), and KeyIn, ValIn are 0;
//   - an inline entry's value is inline (In[valOff:valOff+ValIn]) exactly
//     when Val has no array (cap 0); else Val is the value (moved out when
//     it outgrew the inline bytes: replaceVal, moveRaw) and ValIn is 0;
//   - nothing in the pool points into an entry (the inline bytes are read
//     through key() and val(), slices never stored in the pool).
//
// Crash behaviour: an inline write (storeInline) logs the header when it
// changes (the value's length, its type, a TTL cleared, the value moving
// back from its own array) and the value's inline bytes in one batch (one
// engine call, one fence) before writing them; a value moving out gets a
// new array and the logged header points there (replaceVal). A crash
// before the region commits leaves the old value.
package redis

import (
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

// inlineCap is an inline entry's bytes: with the 96-byte header and the
// object's 16-byte header, a 160-byte slot (a 16-byte key and a value of
// up to 32 bytes, or a 24-byte key and up to 24 bytes, ...).
const inlineCap = 48

// pEntryIn is an entry with its key and short value inline. Code holds it
// as a *pEntry (the same address); the pool's type table sees this type,
// whose only pointers are the header's.
type pEntryIn struct {
	H  pEntry
	In [inlineCap]byte
}

// The header is 96 bytes and the inline bytes follow it (an index out of
// range fails the build).
var (
	_ = [1]int{}[unsafe.Sizeof(pEntry{})-96]
	_ = [1]int{}[unsafe.Offsetof(pEntryIn{}.In)-unsafe.Sizeof(pEntry{})]
)

// inBytes is an inline entry's inline bytes (InCap > 0).
func (e *pEntry) inBytes() []byte {
	// SAFETY: InCap > 0 only for a pEntryIn (newEntry), whose In array of
	// InCap bytes follows the header in the same pool object.
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(e), unsafe.Sizeof(*e))), int(e.InCap))
}

// key is e's key: inline, or its own array.
func (e *pEntry) key() []byte {
	if e.InCap == 0 {
		return e.Key
	}
	return e.inBytes()[:e.KeyIn:e.KeyIn]
}

// valInline is whether e's value is in its inline bytes.
func (e *pEntry) valInline() bool { return e.InCap > 0 && cap(e.Val) == 0 }

// val is e's value: inline (its capacity its length: OBJECT ENCODING
// reads an inline value as an embstr or an int), or its own array.
func (e *pEntry) val() []byte {
	if !e.valInline() {
		return e.Val
	}
	o := valOff(int(e.KeyIn))
	return e.inBytes()[o : o+int(e.ValIn) : o+int(e.ValIn)]
}

// valOff is where an inline value starts after a key of kn bytes: the
// next 8-byte word, so that a value's logged words (valWords) are its own.
func valOff(kn int) int { return (kn + 7) &^ 7 }

// fitsInline is whether a value of n bytes fits after e's inline key.
func fitsInline(e *pEntry, n int) bool {
	return e.InCap > 0 && valOff(int(e.KeyIn))+n <= int(e.InCap)
}

// newEntry allocates an unlinked entry (a key's or a table's field) for k
// holding val: inline when k fits inlineCap, with val inline too when it
// fits after it; else a plain entry with the key's and the value's own
// arrays.
func newEntry(tx *engram.Tx, k []byte, typ int64, val []byte) (*pEntry, error) {
	if len(k) > inlineCap {
		e, err := engram.New[pEntry](tx)
		if err != nil {
			return nil, err
		}
		if e.Key, err = engram.Bytes(tx, k); err != nil {
			return nil, err
		}
		if e.Val, err = engram.Bytes(tx, val); err != nil {
			return nil, err
		}
		e.Type, e.Hash = typ, hashKey(k)
		return e, nil
	}
	ei, err := engram.New[pEntryIn](tx)
	if err != nil {
		return nil, err
	}
	e := &ei.H
	e.Type, e.Hash, e.KeyIn, e.InCap = typ, hashKey(k), uint16(len(k)), inlineCap
	copy(ei.In[:], k)
	if o := valOff(len(k)); o+len(val) <= inlineCap {
		copy(ei.In[o:], val)
		e.ValIn = uint16(len(val))
		return e, nil
	}
	// val is not empty (an empty value fits), so Val gets an array.
	e.Val, err = engram.Bytes(tx, val)
	return e, err
}

// plantUnloggedInline is for the crash explorer's planted-fault test only:
// an inline write stores the value's bytes without logging them (neither
// ahead, prelog.go, nor by storeInline).
var plantUnloggedInline bool

// storeInline writes val (of type typ) into e's inline bytes (fitsInline;
// e has no collection); clearTTL: the caller clears the TTL next, so the
// header is logged when there is one. The value's old array, if it had
// one, is freed at commit.
//  1. log, in one batch, the header if it changes and the bytes written;
//  2. copy the value in, then write the header.
func storeInline(tx *engram.Tx, e *pEntry, typ int64, val []byte, clearTTL bool) error {
	n := len(val)
	o := valOff(int(e.KeyIn))
	dst := e.inBytes()[o : o+n]
	hdr := e.Type != typ || int(e.ValIn) != n || cap(e.Val) > 0
	var b engram.LogBatch
	if hdr || (clearTTL && e.Expire != 0) {
		engram.BatchLog(tx, &b, e)
	}
	if !plantUnloggedInline {
		engram.BatchLogSlice(tx, &b, dst)
	}
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	copy(dst, val) //engramvet:ignore logged above (dst), unless the plant is on
	if !hdr {
		return nil
	}
	old := e.Val
	e.Type, e.ValIn, e.Val = typ, uint16(n), nil //engramvet:ignore the header is logged when hdr (the batch above)
	if cap(old) > 0 {
		return tx.Free(old)
	}
	return nil
}
