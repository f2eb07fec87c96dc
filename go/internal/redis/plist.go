// plist.go: the persistent list, a quicklist of packed chunks (Redis's
// quicklist of listpack nodes): a doubly linked list of chunks, each a
// byte array whose Data[Start:End] holds Count elements back to back,
// each as an entry (entryAt). A push at either end writes its entry into
// the free bytes at that end of the end chunk (or links a new chunk), a
// pop moves Start or End past one: O(1) logged bytes, and no allocation
// per element (a 3-byte element takes 5 pool bytes, was 56 as a slot and
// an array of its own). Chunks grow with the list (32 bytes up to
// qChunkMax), so small lists stay small. Commands that change the middle
// of a chunk (LSET of another size, LINSERT, LREM) replace the chunk by
// new ones (plist2.go).
//
// Invariants: no chunk is empty; Data[Start:End] is exactly Count whole
// entries, read the same from either end; Len is the sum of the chunks'
// Count; Head.Prev and Tail.Next are nil. The bytes outside
// Data[Start:End] are garbage no reader looks at (Data holds no pointers).
//
// Crash behaviour: every change is logged in the executor's region
// first, the entry bytes a push writes included: a pop and a push in one
// region write over bytes the region's start still holds live.
package redis

import (
	engram "github.com/engram-pm/engram-go"
)

const (
	// qChunkMax is the Data size of a full-size chunk (a list's chunks
	// double from qChunkMin as it grows; an element too big for it gets
	// a chunk of its own size).
	qChunkMax = 4096
	qChunkMin = 32
	// entryShort is the longest element whose entry has a 1-byte length
	// at each end; a longer one has entryLong and a 4-byte length there.
	entryShort = 250
	entryLong  = 0xFF
)

// pLNode is a chunk of a list.
type pLNode struct {
	Prev, Next *pLNode
	Start, End int64 // Data[Start:End] holds the entries
	Count      int64 // how many entries
	Data       []byte
}

// entrySize is the bytes of an element of n bytes as an entry:
// [n][bytes][n] up to entryShort, else [0xFF][n u32][bytes][n u32][0xFF].
func entrySize(n int) int64 {
	if n <= entryShort {
		return int64(n) + 2
	}
	return int64(n) + 10
}

// putEntry encodes v into dst (len(dst) == entrySize(len(v))). Every
// caller has logged dst or owns it fresh (lpush's window, lset's
// LogSlice, packChunks' new chunk), so its stores are not the analyzer's.
func putEntry(dst, v []byte) {
	n := len(v)
	if n <= entryShort {
		dst[0], dst[n+1] = byte(n), byte(n) //engramvet:ignore the caller logged dst or owns it
		copy(dst[1:], v)                    //engramvet:ignore the caller logged dst or owns it
		return
	}
	dst[0], dst[n+9] = entryLong, entryLong //engramvet:ignore the caller logged dst or owns it
	putLen32(dst[1:5], n)
	copy(dst[5:], v) //engramvet:ignore the caller logged dst or owns it
	putLen32(dst[n+5:n+9], n)
}

// putLen32 writes n little-endian into the 4 bytes of dst.
func putLen32(dst []byte, n int) {
	for i := range 4 {
		dst[i] = byte(n >> (8 * i)) //engramvet:ignore putEntry's caller logged dst or owns it
	}
}

// len32 reads the 4-byte little-endian length at d[o:o+4].
func len32(d []byte, o int64) int64 {
	return int64(d[o]) | int64(d[o+1])<<8 | int64(d[o+2])<<16 | int64(d[o+3])<<24
}

// entryAt decodes the entry at offset o of d: its bytes (in d) and the
// next entry's offset.
func entryAt(d []byte, o int64) ([]byte, int64) {
	if n := int64(d[o]); n != entryLong {
		return d[o+1 : o+1+n : o+1+n], o + n + 2
	}
	n := len32(d, o+1)
	return d[o+5 : o+5+n : o+5+n], o + n + 10
}

// entryBefore decodes the entry ending at offset e of d: its bytes and
// its own offset.
func entryBefore(d []byte, e int64) ([]byte, int64) {
	if n := int64(d[e-1]); n != entryLong {
		return d[e-1-n : e-1 : e-1], e - n - 2
	}
	n := len32(d, e-5)
	return d[e-5-n : e-5 : e-5], e - n - 10
}

// chunkSize is the Data size of a chunk linked at an end of a list of
// listLen elements for an entry of need bytes.
func chunkSize(listLen, need int64) int64 {
	s := int64(qChunkMin)
	for s < qChunkMax && s < 8*listLen {
		s *= 2
	}
	return max(s, (need+7)&^7)
}

// newLNode allocates an empty chunk of size bytes, to be filled from its
// end (left) or its start.
func newLNode(tx *engram.Tx, size int64, left bool) (*pLNode, error) {
	n, err := engram.New[pLNode](tx)
	if err != nil {
		return nil, err
	}
	if n.Data, err = engram.Make[byte](tx, int(size), int(size)); err != nil {
		return nil, err
	}
	if left {
		n.Start, n.End = size, size
	}
	return n, nil
}

func freeLNode(tx *engram.Tx, n *pLNode) error {
	if err := tx.Free(n.Data); err != nil {
		return err
	}
	return tx.Free(n)
}

func newListColl(tx *engram.Tx) (*pColl, error) { return engram.New[pColl](tx) }

// buildList builds a list of packed chunks from items.
func buildList(tx *engram.Tx, items [][]byte) (*pColl, error) {
	c, err := newListColl(tx)
	if err != nil {
		return nil, err
	}
	if c.Head, c.Tail, err = packChunks(tx, items); err != nil {
		return nil, err
	}
	c.Len = int64(len(items))
	return c, nil
}

// packChunks packs items into new chunks of up to qChunkMax bytes (an
// item bigger than that alone), linked to each other; the first and the
// last (nil for no items).
func packChunks(tx *engram.Tx, items [][]byte) (first, last *pLNode, err error) {
	for len(items) > 0 {
		k, size := 1, entrySize(len(items[0]))
		for k < len(items) && size+entrySize(len(items[k])) <= qChunkMax {
			size += entrySize(len(items[k]))
			k++
		}
		n, err := newLNode(tx, (size+7)&^7, false)
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items[:k] {
			e := n.End + entrySize(len(it))
			putEntry(n.Data[n.End:e], it)
			n.End = e
		}
		n.Count, n.Prev = int64(k), last
		if last != nil {
			last.Next = n //engramvet:ignore last is packChunks', allocated in this region
		} else {
			first = n
		}
		last = n
		items = items[k:]
	}
	return first, last, nil
}

// plantUnloggedPush is for the crash explorer's planted-fault test only:
// a push writes its entry's bytes without logging them.
var plantUnloggedPush bool

// lpush adds v at the left or right end.
func (c *pColl) lpush(tx *engram.Tx, v []byte, left bool) error {
	size := entrySize(len(v))
	n := c.Tail
	if left {
		n = c.Head
	}
	if n == nil || (left && n.Start < size) || (!left && int64(len(n.Data))-n.End < size) {
		var err error
		if n, err = c.linkEnd(tx, left, size); err != nil {
			return err
		}
	}
	lo, hi := n.End, n.End+size
	if left {
		lo, hi = n.Start-size, n.Start
	}
	// Everything the push writes (the entry's window of bytes, the
	// chunk's counters, the length) in one batch: after a pipeline's
	// first push all of it is logged already, and the batch is empty (no
	// engine call).
	var lb engram.LogBatch
	if !plantUnloggedPush {
		batchPushBytes(tx, &lb, n, lo, hi)
	}
	engram.BatchLog(tx, &lb, n)
	engram.BatchLog(tx, &lb, &c.Len)
	if err := tx.LogBatch(&lb); err != nil {
		return err
	}
	putEntry(n.Data[lo:hi], v) // in the window batchPushBytes logged
	if left {
		n.Start = lo
	} else {
		n.End = hi
	}
	n.Count++
	c.Len++
	return nil
}

// pushWindow is how many bytes of a chunk a push logs at once: the
// aligned run of bytes holding its entry. The next pushes into that run
// (the rest of a pipeline's LPUSHes: 25 of 3-byte elements) find it
// logged on the Go side, with no engine call and no fence (a chunk
// linked by the region needs no undo at all: the engine answers at once).
const pushWindow = 128

// batchPushBytes adds to lb the bytes of n around Data[lo:hi] (aligned
// to pushWindow, within the chunk): what a push that writes lo:hi logs.
func batchPushBytes(tx *engram.Tx, lb *engram.LogBatch, n *pLNode, lo, hi int64) {
	lo &^= pushWindow - 1
	hi = min((hi+pushWindow-1)&^(pushWindow-1), int64(len(n.Data)))
	engram.BatchLogSlice(tx, lb, n.Data[lo:hi])
}

// linkEnd links a new empty chunk with room for need bytes at an end
// (filled from its inner side).
func (c *pColl) linkEnd(tx *engram.Tx, left bool, need int64) (*pLNode, error) {
	n, err := newLNode(tx, chunkSize(c.Len, need), left)
	if err != nil {
		return nil, err
	}
	if left {
		return n, c.splice(tx, nil, c.Head, n, n)
	}
	return n, c.splice(tx, c.Tail, nil, n, n)
}

// splice links the run of chunks first..last (nil: none) between prev
// and next (nil: the list's ends), logging the links it changes outside
// the run; the run's own outer links are set without a log (it is new).
func (c *pColl) splice(tx *engram.Tx, prev, next, first, last *pLNode) error {
	if first == nil {
		first, last = next, prev
	} else {
		first.Prev, last.Next = prev, next //engramvet:ignore the run is new, allocated in this region
	}
	if prev != nil {
		if err := tx.Log(&prev.Next); err != nil {
			return err
		}
		prev.Next = first
	} else {
		if err := tx.Log(&c.Head); err != nil {
			return err
		}
		c.Head = first
	}
	if next != nil {
		if err := tx.Log(&next.Prev); err != nil {
			return err
		}
		next.Prev = last
		return nil
	}
	if err := tx.Log(&c.Tail); err != nil {
		return err
	}
	c.Tail = last
	return nil
}

// lpop removes and returns (a Go copy of) the element at an end; nil if
// the list is empty.
func (c *pColl) lpop(tx *engram.Tx, left bool) ([]byte, error) {
	n := c.Tail
	if left {
		n = c.Head
	}
	if n == nil {
		return nil, nil
	}
	if err := tx.Log(n); err != nil {
		return nil, err
	}
	var b []byte
	if left {
		b, n.Start = entryAt(n.Data, n.Start)
	} else {
		b, n.End = entryBefore(n.Data, n.End)
	}
	v := append([]byte{}, b...)
	n.Count--
	if n.Count == 0 {
		if err := c.unlink(tx, n); err != nil {
			return nil, err
		}
	}
	if err := tx.Log(&c.Len); err != nil {
		return nil, err
	}
	c.Len--
	return v, nil
}

// unlink removes a chunk and frees it.
func (c *pColl) unlink(tx *engram.Tx, n *pLNode) error {
	if err := c.splice(tx, n.Prev, n.Next, nil, nil); err != nil {
		return err
	}
	return freeLNode(tx, n)
}

// lchunk finds element i (0 <= i < Len): its chunk and its index there,
// walking from the nearer end.
func (c *pColl) lchunk(i int64) (*pLNode, int64) {
	if i < c.Len/2 {
		for n := c.Head; n != nil; n = n.Next {
			if i < n.Count {
				return n, i
			}
			i -= n.Count
		}
		return nil, 0
	}
	j := c.Len - 1 - i
	for n := c.Tail; n != nil; n = n.Prev {
		if j < n.Count {
			return n, n.Count - 1 - j
		}
		j -= n.Count
	}
	return nil, 0
}

// offsetOf is the offset of the chunk's entry k (0 <= k < Count), walked
// from the nearer end.
func (n *pLNode) offsetOf(k int64) int64 {
	if k <= n.Count/2 {
		o := n.Start
		for ; k > 0; k-- {
			_, o = entryAt(n.Data, o)
		}
		return o
	}
	o := n.End
	for j := n.Count - k; j > 0; j-- {
		_, o = entryBefore(n.Data, o)
	}
	return o
}

// entries is the chunk's elements (slices of its Data).
func (n *pLNode) entries() [][]byte {
	out := make([][]byte, 0, n.Count)
	for o := n.Start; o < n.End; {
		var v []byte
		v, o = entryAt(n.Data, o)
		out = append(out, v)
	}
	return out
}

func (c *pColl) lget(i int64) []byte {
	n, k := c.lchunk(i)
	if n == nil {
		return nil
	}
	v, _ := entryAt(n.Data, n.offsetOf(k))
	return v
}

// lset replaces element i: in place when the entry keeps its size, else
// by replacing its chunk.
func (c *pColl) lset(tx *engram.Tx, i int64, v []byte) error {
	n, k := c.lchunk(i)
	if n == nil {
		return nil
	}
	o := n.offsetOf(k)
	if _, next := entryAt(n.Data, o); next-o == entrySize(len(v)) {
		if err := engram.LogSlice(tx, n.Data[o:next]); err != nil {
			return err
		}
		putEntry(n.Data[o:next], v)
		return nil
	}
	items := n.entries()
	items[k] = v
	return c.replace(tx, n, items)
}

// replace puts new chunks holding items in the place of chunk n (which
// is freed; none for no items). items may be n's own bytes: they are
// copied before n is freed (at commit).
func (c *pColl) replace(tx *engram.Tx, n *pLNode, items [][]byte) error {
	first, last, err := packChunks(tx, items)
	if err != nil {
		return err
	}
	if err := c.splice(tx, n.Prev, n.Next, first, last); err != nil {
		return err
	}
	return freeLNode(tx, n)
}

// lrange calls fn for elements lo..hi (valid indexes) in order.
func (c *pColl) lrange(lo, hi int64, fn func(v []byte)) {
	n, k := c.lchunk(lo)
	if n == nil {
		return
	}
	o := n.offsetOf(k)
	for i := lo; i <= hi && n != nil; i++ {
		var v []byte
		v, o = entryAt(n.Data, o)
		fn(v)
		if o == n.End {
			n = n.Next
			if n != nil {
				o = n.Start
			}
		}
	}
}

// lall copies every element out.
func (c *pColl) lall() [][]byte {
	out := make([][]byte, 0, c.Len)
	if c.Len > 0 {
		c.lrange(0, c.Len-1, func(v []byte) { out = append(out, append([]byte{}, v...)) })
	}
	return out
}
