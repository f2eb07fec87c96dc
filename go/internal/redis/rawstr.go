// rawstr.go: strings changed where they are (APPEND, SETRANGE, SETBIT), as
// Redis's sds strings are. A raw string's pool array keeps spare capacity
// (cap > len, which OBJECT ENCODING reports as "raw"), so:
//   - a write that fits the spare capacity patches the string in place,
//     logging the slice header and only the bytes it changes;
//   - a write that does not moves the string, once, to a new array with
//     room to grow (twice the new length below 1 MiB, 1 MiB more above:
//     Redis's greedy preallocation), copying the old bytes and the
//     command's bytes into it.
//
// Either way the command's bytes are copied into the pool once and never
// through the Go heap, and a run of APPENDs costs amortised O(bytes
// appended), not O(string length) each (docs/redis.md, "Large values").
//
// Crash behaviour: a patch's header and bytes are logged in one batch (one
// undo fence) before they change; a moved string's new array is fresh in the
// region, the entry is logged before it points there, and the old array is
// freed at commit. A crash before the region commits leaves the old value.
package redis

import engram "github.com/engram-pm/engram-go"

// rawMaxPrealloc is where a moved string's spare capacity stops doubling
// (Redis's SDS_MAX_PREALLOC).
const rawMaxPrealloc = 1 << 20

// rawCap is the capacity of the array a raw string of n bytes moves to: at
// least one spare byte, so that it stays raw.
func rawCap(n int) int {
	if n < rawMaxPrealloc {
		return 2*n + 1
	}
	return n + rawMaxPrealloc
}

// rawWrite makes the string under k newLen bytes long with src written at
// off; bytes between the old end and off read as zero. e is k's entry (nil:
// the key is new; it is created). newLen is at least the old length and
// off+len(src) at most newLen: these commands never shorten a string.
func (x *ctx) rawWrite(k []byte, e *pEntry, newLen, off int, src []byte) error {
	if e == nil {
		ne, err := x.put(k, tString, nil, false)
		if err != nil {
			return err
		}
		e = ne
	} else {
		x.touch(k)
	}
	if len(src) == 0 && newLen == len(e.val()) {
		return nil
	}
	if cap(e.Val) > newLen { // a raw string (never an inline value: its Val is empty)
		return patchRaw(x.tx, e, newLen, off, src)
	}
	return moveRaw(x.tx, e, newLen, off, src)
}

// patchRaw writes src at off within e's spare capacity (cap > newLen):
//  1. log the slice header and the bytes from the first changed one (the
//     old end, if off is past it) to the end of src, in one batch;
//  2. zero the gap past the old end, copy src in, lengthen the header.
func patchRaw(tx *engram.Tx, e *pEntry, newLen, off int, src []byte) error {
	full := e.Val[:cap(e.Val)]
	lo, hi := min(len(e.Val), off), off+len(src)
	var b engram.LogBatch
	engram.BatchLog(tx, &b, &e.Val)
	if hi > lo {
		engram.BatchLogSlice(tx, &b, full[lo:hi])
	}
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	if off > len(e.Val) { //engramvet:ignore [len(e.Val), off) is inside the logged full[lo:hi] (lo = len(e.Val) here)
		clear(full[len(e.Val):off])
	}
	copy(full[off:], src) //engramvet:ignore [off, off+len(src)) is the logged full[lo:hi]'s tail (lo <= off)
	e.Val = full[:newLen]
	return nil
}

// moveRaw moves e's string to a new array of newLen bytes with room to grow,
// with src written at off (the array is zeroed: the gap reads as zero), then
// points the logged entry at it and frees the old array at commit (an
// inline value moves out of its entry: entry.go).
func moveRaw(tx *engram.Tx, e *pEntry, newLen, off int, src []byte) error {
	nv, err := engram.Make[byte](tx, newLen, rawCap(newLen))
	if err != nil {
		return err
	}
	copy(nv, e.val())
	copy(nv[off:], src)
	return replaceVal(tx, e, tString, nv)
}
