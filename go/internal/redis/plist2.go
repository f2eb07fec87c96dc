// plist2.go: LREM and LINSERT on the persistent quicklist (plist.go) in
// place. LREM compacts only the chunks holding removed elements (each
// changed slot logged, an emptied chunk unlinked); LINSERT shifts the
// pivot's chunk by one slot toward a free end, splitting a full chunk in
// two first. Neither rebuilds the list: the logged bytes are bounded by
// the chunks touched, not the list's length.
//
// Invariants: those of plist.go (no empty chunk; slots outside
// Items[Start:Start+Count] nil; Len the sum of the Counts).
//
// Crash behaviour: every change is logged in the command's region before
// it is made, so recovery restores the whole list as it was.
package redis

import (
	engram "github.com/engram-pm/engram-go"
)

// lremove removes up to limit (0: all) elements equal to v, from the head
// (fromHead) or the tail, and returns how many it removed.
func (c *pColl) lremove(tx *engram.Tx, v []byte, limit int64, fromHead bool) (int64, error) {
	removed := int64(0)
	n := c.Tail
	if fromHead {
		n = c.Head
	}
	for n != nil && (limit == 0 || removed < limit) {
		next := n.Prev
		if fromHead {
			next = n.Next
		}
		k, err := c.compact(tx, n, v, limit-removed, limit == 0, fromHead)
		if err != nil {
			return removed, err
		}
		removed += k
		n = next
	}
	if removed > 0 {
		if err := tx.Log(&c.Len); err != nil {
			return removed, err
		}
		c.Len -= removed
	}
	return removed, nil
}

// compact removes from chunk n up to max (all if unlimited) elements equal
// to v, scanning from the side fromHead says, and closes the gaps by
// moving the kept elements toward the chunk's start; an emptied chunk is
// unlinked.
func (c *pColl) compact(tx *engram.Tx, n *pLNode, v []byte, max int64, unlimited, fromHead bool) (int64, error) {
	lo, hi := n.Start, n.Start+n.Count
	drop := make([]bool, hi-lo)
	k := int64(0)
	for j := int64(0); j < hi-lo && (unlimited || k < max); j++ {
		i := lo + j
		if !fromHead {
			i = hi - 1 - j
		}
		if string(n.Items[i]) == string(v) {
			drop[i-lo], k = true, k+1
		}
	}
	if k == 0 {
		return 0, nil
	}
	w := lo
	for i := lo; i < hi; i++ {
		it := n.Items[i]
		if drop[i-lo] {
			if cap(it) > 0 {
				if err := tx.Free(it); err != nil {
					return 0, err
				}
			}
			continue
		}
		if w != i {
			if err := logSet(tx, n, w, it); err != nil {
				return 0, err
			}
		}
		w++
	}
	for i := w; i < hi; i++ {
		if err := logSet(tx, n, i, nil); err != nil {
			return 0, err
		}
	}
	if err := tx.Log(&n.Count); err != nil {
		return 0, err
	}
	n.Count -= k
	if n.Count == 0 {
		return k, c.unlink(tx, n)
	}
	return k, nil
}

// logSet logs slot i of chunk n and stores it.
func logSet(tx *engram.Tx, n *pLNode, i int64, v []byte) error {
	if err := tx.Log(&n.Items[i]); err != nil {
		return err
	}
	n.Items[i] = v
	return nil
}

// lfind finds the first element equal to v from the head: its chunk and
// slot (nil if absent).
func (c *pColl) lfind(v []byte) (*pLNode, int64) {
	for n := c.Head; n != nil; n = n.Next {
		for i := n.Start; i < n.Start+n.Count; i++ {
			if string(n.Items[i]) == string(v) {
				return n, i
			}
		}
	}
	return nil, 0
}

// linsert inserts v before or after the first element equal to pivot; it
// reports whether the pivot was found.
func (c *pColl) linsert(tx *engram.Tx, pivot, v []byte, before bool) (bool, error) {
	n, s := c.lfind(pivot)
	if n == nil {
		return false, nil
	}
	p := s + 1 // the slot the new element takes
	if before {
		p = s
	}
	b, err := engram.Bytes(tx, v)
	if err != nil {
		return true, err
	}
	if err := c.insertAt(tx, n, p, b); err != nil {
		return true, err
	}
	if err := tx.Log(&c.Len); err != nil {
		return true, err
	}
	c.Len++
	return true, nil
}

// insertAt puts b at slot p of chunk n (n.Start <= p <= n.Start+n.Count),
// shifting toward a free end, splitting n first when it is full.
func (c *pColl) insertAt(tx *engram.Tx, n *pLNode, p int64, b []byte) error {
	end := n.Start + n.Count
	switch {
	case end < int64(len(n.Items)):
		for i := end; i > p; i-- {
			if err := logSet(tx, n, i, n.Items[i-1]); err != nil {
				return err
			}
		}
		if err := logSet(tx, n, p, b); err != nil {
			return err
		}
		if err := tx.Log(&n.Count); err != nil {
			return err
		}
		n.Count++
		return nil
	case n.Start > 0:
		for i := n.Start - 1; i < p-1; i++ {
			if err := logSet(tx, n, i, n.Items[i+1]); err != nil {
				return err
			}
		}
		if err := logSet(tx, n, p-1, b); err != nil {
			return err
		}
		if err := tx.Log(n); err != nil {
			return err
		}
		n.Start--
		n.Count++
		return nil
	}
	m, err := c.split(tx, n)
	if err != nil {
		return err
	}
	if p <= n.Start+n.Count {
		return c.insertAt(tx, n, p, b)
	}
	return c.insertAt(tx, m, p-(n.Start+n.Count), b)
}

// split moves the second half of full chunk n into a new chunk linked
// after it (both then have free slots at their ends) and returns it.
func (c *pColl) split(tx *engram.Tx, n *pLNode) (*pLNode, error) {
	half := n.Count / 2
	keep := n.Count - half
	m, err := newLNode(tx, len(n.Items), 0)
	if err != nil {
		return nil, err
	}
	from := n.Start + keep
	copy(m.Items, n.Items[from:n.Start+n.Count]) //engramvet:ignore m is newLNode's, allocated in this region: its Items too
	m.Count = half
	for i := from; i < n.Start+n.Count; i++ {
		if err := logSet(tx, n, i, nil); err != nil {
			return nil, err
		}
	}
	if err := tx.Log(n); err != nil {
		return nil, err
	}
	n.Count = keep
	m.Prev, m.Next = n, n.Next
	if n.Next != nil {
		if err := tx.Log(&n.Next.Prev); err != nil {
			return nil, err
		}
		n.Next.Prev = m
	} else {
		if err := tx.Log(&c.Tail); err != nil {
			return nil, err
		}
		c.Tail = m
	}
	n.Next = m
	return m, nil
}

// lremInPlace is LREM on a quicklist: count > 0 from the head, < 0 from
// the tail, 0 all; the key goes when the list empties.
func lremInPlace(x *ctx, e *pEntry, count int64) error {
	limit := count
	if limit < 0 {
		limit = -limit
	}
	removed, err := e.Coll.lremove(x.tx, x.args[3], limit, count >= 0)
	if err != nil || removed == 0 {
		if err == nil {
			x.w.Int(0)
		}
		return err
	}
	x.touch(x.args[1])
	x.w.Int(removed)
	if e.Coll.Len == 0 {
		_, err = x.dict().remove(x.tx, x.args[1])
	}
	return err
}

// linsertInPlace is LINSERT on a quicklist: the new length, or -1 when
// the pivot is absent.
func linsertInPlace(x *ctx, e *pEntry, before bool) error {
	found, err := e.Coll.linsert(x.tx, x.args[3], x.args[4], before)
	if err != nil {
		return err
	}
	if !found {
		x.w.Int(-1)
		return nil
	}
	x.touch(x.args[1])
	x.w.Int(e.Coll.Len)
	return nil
}
