// pztable.go: a big sorted set's member table (pZDict): a chained hash
// table, with incremental rehash as store.go's pDict (a bucket moves per
// add, removal and move of a member: zaddAt), whose chains are
// the skiplist nodes themselves (pZNode's Next and Hash: pzset.go). A
// lookup of a member ends at its node, which holds the member and its
// score: there is no table entry beside the node (pool layout version 3,
// server.go), so a member costs one node and its bytes.
//
// This is pDict's code for nodes instead of entries (the two chain types
// differ: an entry is a struct, a node an array of level pairs); the
// functions keep pDict's names and order, so a fix to one is easily made
// to the other. It is a copy, not one generic table, on purpose: Go
// compiles a method of a generic type once for all pointer type arguments
// and calls the chain's accessors (next link, hash, key) through a
// dictionary, not inlined, and pDict.find is on every command's path.
//
// Invariants: a node is in exactly one of the two tables, in the bucket
// its Hash selects; Used counts the nodes of both; every store into the
// table is preceded by tx.Log of what it overwrites.
//
// Crash behaviour: the table changes only inside the executor's region
// (each change logged first), so a crash leaves it before or after the
// region.
package redis

import (
	engram "github.com/engram-pm/engram-go"
)

// pZDict is a sorted set's member -> node table.
type pZDict struct {
	T0, T1    []*pZNode
	Used      int64
	RehashIdx int64 // -1: not rehashing
}

func newZDict(tx *engram.Tx) (*pZDict, error) {
	d, err := engram.New[pZDict](tx)
	if err != nil {
		return nil, err
	}
	if d.T0, err = engram.Make[*pZNode](tx, initialBuckets, initialBuckets); err != nil {
		return nil, err
	}
	d.RehashIdx = -1
	return d, nil
}

// find is m's node (h = hashKey(m)) and the slot that points at it, or
// nils.
func (d *pZDict) find(m []byte, h uint64) (slot **pZNode, n *pZNode) {
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
		for n = *slot; n != nil; n = n.Next {
			if n.Hash == h && string(n.member()) == string(m) {
				return slot, n
			}
			slot = &n.Next
		}
	}
	return nil, nil
}

// insertSlot is where a new member goes: T1 while rehashing, else T0.
func (d *pZDict) insertSlot(h uint64) **pZNode {
	tab := d.T0
	if d.RehashIdx >= 0 {
		tab = d.T1
	}
	return &tab[h&uint64(len(tab)-1)]
}

// prepareAdd starts growing if due, then takes one rehash step (each
// logged on its own), so that the tables do not change between
// insertSlot and linkLogged.
func (d *pZDict) prepareAdd(tx *engram.Tx) error {
	if err := d.maybeGrow(tx); err != nil {
		return err
	}
	return d.rehashStep(tx)
}

// rehashStep moves one bucket (rehashFrom: after up to 10 empty ones
// skipped).
func (d *pZDict) rehashStep(tx *engram.Tx) error {
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
// the logging ahead of a batch's ZADDs follows too (appendRehashPrelog).
func (d *pZDict) rehashFrom(i int64) int64 {
	for empty := 0; empty < 10 && i < int64(len(d.T0)) && d.T0[i] == nil; empty++ {
		i++
	}
	return i
}

// moveLinks calls f with every link that moving T0's bucket i changes:
// each chain node's Next and its destination slot in T1, then the source
// slot (what moveBucket logs, and appendRehashPrelog ahead of it).
func (d *pZDict) moveLinks(i int64, f func(**pZNode)) {
	mask := uint64(len(d.T1) - 1)
	for n := d.T0[i]; n != nil; n = n.Next {
		f(&n.Next)
		f(&d.T1[n.Hash&mask])
	}
	f(&d.T0[i])
}

// moveBucket moves T0's bucket i into T1: every link it changes
// (moveLinks) logged with one engine call and one fence, then changed.
func (d *pZDict) moveBucket(tx *engram.Tx, i int64) error {
	src := &d.T0[i]
	var b engram.LogBatch
	d.moveLinks(i, func(p **pZNode) { engram.BatchLog(tx, &b, p) })
	if plantZMoveUnlogged {
		b = engram.LogBatch{} // the planted fault: trust the logging ahead (zwarm.go)
	}
	if err := tx.LogBatch(&b); err != nil {
		return err
	}
	for n := *src; n != nil; {
		next := n.Next
		dst := &d.T1[n.Hash&uint64(len(d.T1)-1)]
		n.Next = *dst //engramvet:ignore this and the next line: batch-logged by moveLinks over the same chain (each Next, each destination slot)
		*dst = n
		n = next
	}
	*src = nil //engramvet:ignore batch-logged by moveLinks (the source slot, its last link)
	return nil
}

// plantZMoveUnlogged is for the crash explorer's planted-fault test only:
// a sorted set's bucket move (pZDict.moveBucket) trusts what was logged
// ahead (appendRehashPrelog) and logs nothing itself.
var plantZMoveUnlogged bool

func (d *pZDict) finishRehash(tx *engram.Tx) error {
	if err := tx.Log(d); err != nil {
		return err
	}
	old := d.T0
	d.T0, d.T1, d.RehashIdx = d.T1, nil, -1
	return tx.Free(old)
}

// maybeGrow starts a rehash into a table twice the size at load 1.
func (d *pZDict) maybeGrow(tx *engram.Tx) error {
	if d.RehashIdx >= 0 || d.Used < int64(len(d.T0)) {
		return nil
	}
	n := len(d.T0) * 2
	t1, err := engram.Make[*pZNode](tx, n, n)
	if err != nil {
		return err
	}
	if err := tx.Log(d); err != nil {
		return err
	}
	d.T1, d.RehashIdx = t1, 0
	return nil
}

// logLink adds to b what linking or unlinking a node at slot changes: the
// slot and the count.
func (d *pZDict) logLink(tx *engram.Tx, b *engram.LogBatch, slot **pZNode) {
	engram.BatchLog(tx, b, slot)
	engram.BatchLog(tx, b, &d.Used)
}

// linkLogged links n at slot (insertSlot after prepareAdd; logLink done).
func (d *pZDict) linkLogged(slot **pZNode, n *pZNode) {
	n.Next = *slot
	*slot = n
	d.Used++
}

// unlinkLogged unlinks n from slot, the slot that points at it (find;
// logLink done).
func (d *pZDict) unlinkLogged(slot **pZNode, n *pZNode) {
	*slot = n.Next
	d.Used--
}

// free frees the tables and d (the nodes are the skiplist's).
func (d *pZDict) free(tx *engram.Tx) error {
	for _, t := range [][]*pZNode{d.T0, d.T1} {
		if cap(t) > 0 {
			if err := tx.Free(t); err != nil {
				return err
			}
		}
	}
	return tx.Free(d)
}

// scan visits buckets from cursor until it has seen count nodes (before
// MATCH filtering) or visited 10*count buckets, as dictScan does, and
// returns the next cursor, 0 at the end.
func (d *pZDict) scan(cur uint64, count int64, fn func(n *pZNode)) uint64 {
	seen := int64(0)
	visit := func(tab []*pZNode, i uint64) {
		for n := tab[i]; n != nil; n = n.Next {
			seen++
			fn(n)
		}
	}
	small, large := d.T0, []*pZNode(nil)
	if d.RehashIdx >= 0 {
		large = d.T1
		if len(large) < len(small) {
			small, large = large, small
		}
	}
	for i := int64(0); i < 10*count && seen < count; i++ {
		if cur = scanBuckets(small, large, cur, visit); cur == 0 {
			break
		}
	}
	return cur
}

// scanBuckets visits small's bucket cursor and, when large is not nil,
// the buckets of large it expands to, and returns the next cursor (the
// reverse-binary cursor of pDict.scanBucket and Redis's dictScan).
func scanBuckets[E any](small, large []E, cursor uint64, visit func(tab []E, i uint64)) uint64 {
	m0 := uint64(len(small) - 1)
	visit(small, cursor&m0)
	if large == nil {
		cursor |= ^m0
		return rev(rev(cursor) + 1)
	}
	m1 := uint64(len(large) - 1)
	for {
		visit(large, cursor&m1)
		cursor |= ^m1
		cursor = rev(rev(cursor) + 1)
		if cursor&(m0^m1) == 0 {
			return cursor
		}
	}
}
