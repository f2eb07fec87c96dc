// plist2.go: LREM and LINSERT on the persistent quicklist (plist.go) in
// place. Both replace only the chunks they change: LREM each chunk
// holding removed elements by a chunk of the kept ones (an emptied chunk
// is unlinked), LINSERT the pivot's chunk by one with the new element
// (two if it no longer fits). Neither rebuilds the list: the logged bytes
// are the links around the chunks touched, not the list's length.
//
// Invariants: those of plist.go (no empty chunk; Data[Start:End] exactly
// Count entries; Len the sum of the Counts).
//
// Crash behaviour: every change is logged in the command's region before
// it is made (the new chunks are the region's own), so recovery restores
// the whole list as it was.
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
// to v, scanning from the side fromHead says: a chunk holding one is
// replaced by a chunk of the kept ones (unlinked if none is kept).
func (c *pColl) compact(tx *engram.Tx, n *pLNode, v []byte, max int64, unlimited, fromHead bool) (int64, error) {
	if !n.holds(v) {
		return 0, nil
	}
	items := n.entries()
	drop := make([]bool, len(items))
	k := int64(0)
	for j := range items {
		if !unlimited && k == max {
			break
		}
		i := j
		if !fromHead {
			i = len(items) - 1 - j
		}
		if string(items[i]) == string(v) {
			drop[i], k = true, k+1
		}
	}
	kept := items[:0]
	for i, it := range items {
		if !drop[i] {
			kept = append(kept, it)
		}
	}
	return k, c.replace(tx, n, kept)
}

// holds is whether an element of chunk n equals v.
func (n *pLNode) holds(v []byte) bool {
	for o := n.Start; o < n.End; {
		var it []byte
		if it, o = entryAt(n.Data, o); string(it) == string(v) {
			return true
		}
	}
	return false
}

// lfind finds the first element equal to v from the head: its chunk and
// index there (nil if absent).
func (c *pColl) lfind(v []byte) (*pLNode, int64) {
	for n := c.Head; n != nil; n = n.Next {
		k := int64(0)
		for o := n.Start; o < n.End; k++ {
			var it []byte
			if it, o = entryAt(n.Data, o); string(it) == string(v) {
				return n, k
			}
		}
	}
	return nil, 0
}

// linsert inserts v before or after the first element equal to pivot; it
// reports whether the pivot was found.
func (c *pColl) linsert(tx *engram.Tx, pivot, v []byte, before bool) (bool, error) {
	n, k := c.lfind(pivot)
	if n == nil {
		return false, nil
	}
	if !before {
		k++ // the index the new element takes
	}
	items := n.entries()
	items = append(items[:k:k], append([][]byte{v}, items[k:]...)...)
	if err := c.replace(tx, n, items); err != nil {
		return true, err
	}
	if err := tx.Log(&c.Len); err != nil {
		return true, err
	}
	c.Len++
	return true, nil
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
