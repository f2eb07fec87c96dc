// plist.go: the persistent list, a quicklist: a doubly linked list of
// chunks, each an array of element slots (pool byte arrays) of which
// Items[Start : Start+Count] are in use. A push at either end fills a free
// slot of the end chunk (or links a new chunk), a pop clears one, so each
// costs O(1) logged bytes: the slot, the chunk's counters, the length.
// Chunks grow with the list (4 slots up to 64), so small lists stay small.
//
// Invariants: no chunk is empty; slots outside Items[Start:Start+Count]
// are nil (the collector must not see freed elements); Len is the sum of
// the chunks' Count; Head.Prev and Tail.Next are nil.
//
// Crash behaviour: every change is logged in the executor's region first.
package redis

import (
	engram "github.com/engram-pm/engram-go"
)

const qChunkMax = 64

type pLNode struct {
	Prev, Next   *pLNode
	Start, Count int64
	Items        [][]byte
}

func chunkCap(n int64) int { return int(min(qChunkMax, max(4, n))) }

func newLNode(tx *engram.Tx, size int, start int64) (*pLNode, error) {
	n, err := engram.New[pLNode](tx)
	if err != nil {
		return nil, err
	}
	if n.Items, err = engram.Make[[]byte](tx, size, size); err != nil {
		return nil, err
	}
	n.Start = start
	return n, nil
}

func freeLNode(tx *engram.Tx, n *pLNode) error {
	for _, it := range n.Items[n.Start : n.Start+n.Count] {
		if cap(it) > 0 {
			if err := tx.Free(it); err != nil {
				return err
			}
		}
	}
	if err := tx.Free(n.Items); err != nil {
		return err
	}
	return tx.Free(n)
}

func newListColl(tx *engram.Tx) (*pColl, error) { return engram.New[pColl](tx) }

// buildList builds a list of full chunks from items.
func buildList(tx *engram.Tx, items [][]byte) (*pColl, error) {
	c, err := newListColl(tx)
	if err != nil {
		return nil, err
	}
	for len(items) > 0 {
		k := min(len(items), qChunkMax)
		n, err := newLNode(tx, chunkCap(int64(len(items))), 0)
		if err != nil {
			return nil, err
		}
		for i, it := range items[:k] {
			if n.Items[i], err = engram.Bytes(tx, it); err != nil {
				return nil, err
			}
		}
		n.Count, n.Prev = int64(k), c.Tail
		if c.Tail != nil {
			c.Tail.Next = n
		} else {
			c.Head = n
		}
		c.Tail = n
		c.Len += int64(k)
		items = items[k:]
	}
	return c, nil
}

// lpush adds v at the left or right end.
func (c *pColl) lpush(tx *engram.Tx, v []byte, left bool) error {
	b, err := engram.Bytes(tx, v)
	if err != nil {
		return err
	}
	n := c.Tail
	if left {
		n = c.Head
	}
	full := n == nil || (left && n.Start == 0) || (!left && n.Start+n.Count == int64(len(n.Items)))
	if full {
		if n, err = c.linkEnd(tx, left); err != nil {
			return err
		}
	}
	slot := n.Start + n.Count
	if left {
		slot = n.Start - 1
	}
	// Everything the push writes (the slot's run, the chunk's counters,
	// the length) in one batch: after a pipeline's first push all of it
	// is logged already, and the batch is empty (no engine call).
	var lb engram.LogBatch
	batchPushSlots(tx, &lb, n, slot)
	engram.BatchLog(tx, &lb, n)
	engram.BatchLog(tx, &lb, &c.Len)
	if err := tx.LogBatch(&lb); err != nil {
		return err
	}
	n.Items[slot] = b //engramvet:ignore batchPushSlots logged the aligned window holding slot
	if left {
		n.Start--
	}
	n.Count++
	c.Len++
	return nil
}

// pushWindow is how many slots of a chunk a push logs at once: the
// aligned run of slots holding the pushed one. The next pushes into that
// run (the rest of a pipeline's LPUSHes) find it logged on the Go side,
// with no engine call and no fence: one log call per 8 pushes instead of
// one each, for 192 bytes of undo instead of 24 (a chunk linked by the
// region needs no undo at all: the engine answers at once).
const pushWindow = 8

// batchPushSlots adds to lb the slots of n around slot (pushWindow of
// them, aligned, within the chunk): what a push that writes slot logs.
func batchPushSlots(tx *engram.Tx, lb *engram.LogBatch, n *pLNode, slot int64) {
	lo := slot &^ (pushWindow - 1)
	hi := min(lo+pushWindow, int64(len(n.Items)))
	engram.BatchLogSlice(tx, lb, n.Items[lo:hi])
}

// linkEnd links a new empty chunk at an end (filled from its inner side).
func (c *pColl) linkEnd(tx *engram.Tx, left bool) (*pLNode, error) {
	size := chunkCap(c.Len)
	start := int64(0)
	if left {
		start = int64(size)
	}
	n, err := newLNode(tx, size, start)
	if err != nil {
		return nil, err
	}
	if err := tx.Log(c); err != nil {
		return nil, err
	}
	if left {
		n.Next = c.Head
		if c.Head != nil {
			if err := tx.Log(&c.Head.Prev); err != nil {
				return nil, err
			}
			c.Head.Prev = n
		} else {
			c.Tail = n
		}
		c.Head = n
		return n, nil
	}
	n.Prev = c.Tail
	if c.Tail != nil {
		if err := tx.Log(&c.Tail.Next); err != nil {
			return nil, err
		}
		c.Tail.Next = n
	} else {
		c.Head = n
	}
	c.Tail = n
	return n, nil
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
	slot := n.Start + n.Count - 1
	if left {
		slot = n.Start
	}
	old := n.Items[slot]
	v := append([]byte{}, old...)
	if err := tx.Log(&n.Items[slot]); err != nil {
		return nil, err
	}
	n.Items[slot] = nil
	if err := tx.Log(n); err != nil {
		return nil, err
	}
	if left {
		n.Start++
	}
	n.Count--
	if cap(old) > 0 {
		if err := tx.Free(old); err != nil {
			return nil, err
		}
	}
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

// unlink removes an empty chunk and frees it.
func (c *pColl) unlink(tx *engram.Tx, n *pLNode) error {
	if err := tx.Log(c); err != nil {
		return err
	}
	if n.Prev != nil {
		if err := tx.Log(&n.Prev.Next); err != nil {
			return err
		}
		n.Prev.Next = n.Next
	} else {
		c.Head = n.Next
	}
	if n.Next != nil {
		if err := tx.Log(&n.Next.Prev); err != nil {
			return err
		}
		n.Next.Prev = n.Prev
	} else {
		c.Tail = n.Prev
	}
	if err := tx.Free(n.Items); err != nil {
		return err
	}
	return tx.Free(n)
}

// lslot finds element i (0 <= i < Len): its chunk and slot, walking from
// the nearer end.
func (c *pColl) lslot(i int64) (*pLNode, int64) {
	if i < c.Len/2 {
		for n := c.Head; n != nil; n = n.Next {
			if i < n.Count {
				return n, n.Start + i
			}
			i -= n.Count
		}
		return nil, 0
	}
	j := c.Len - 1 - i
	for n := c.Tail; n != nil; n = n.Prev {
		if j < n.Count {
			return n, n.Start + n.Count - 1 - j
		}
		j -= n.Count
	}
	return nil, 0
}

func (c *pColl) lget(i int64) []byte {
	n, s := c.lslot(i)
	if n == nil {
		return nil
	}
	return n.Items[s]
}

// lset replaces element i.
func (c *pColl) lset(tx *engram.Tx, i int64, v []byte) error {
	n, s := c.lslot(i)
	if n == nil {
		return nil
	}
	b, err := engram.Bytes(tx, v)
	if err != nil {
		return err
	}
	old := n.Items[s]
	if err := tx.Log(&n.Items[s]); err != nil {
		return err
	}
	n.Items[s] = b
	if cap(old) > 0 {
		return tx.Free(old)
	}
	return nil
}

// lrange calls fn for elements lo..hi (valid indexes) in order.
func (c *pColl) lrange(lo, hi int64, fn func(v []byte)) {
	n, s := c.lslot(lo)
	for k := lo; k <= hi && n != nil; k++ {
		fn(n.Items[s])
		s++
		if s == n.Start+n.Count {
			n = n.Next
			if n != nil {
				s = n.Start
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
