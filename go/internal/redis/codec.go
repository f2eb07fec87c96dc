// codec.go: the compact encoding of collection values. A list, hash, set
// or sorted set is stored as one pool byte array: a count, then each
// element as a varint length and its bytes (a sorted set's element is
// 8 bytes of score followed by the member). Commands decode it into Go
// values, change them and write a new array in one transaction (the old
// one is freed at commit), so each write copies the value once.
//
// Invariants: a sorted set is kept ordered by (score, member); a hash and
// a set keep insertion order (what Redis's listpack encoding replies for
// small values).
//
// Crash behaviour: none here; arrays are written by store.go's setVal.
package redis

import (
	"encoding/binary"
	"math"
	"sort"
)

func putBytes(out []byte, b []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

func getBytes(in []byte) ([]byte, []byte, bool) {
	n, k := binary.Uvarint(in)
	if k <= 0 || uint64(len(in)-k) < n {
		return nil, nil, false
	}
	return in[k : k+int(n)], in[k+int(n):], true
}

// encodeList encodes a list of elements (also sets).
func encodeList(items [][]byte) []byte {
	size := 10
	for _, it := range items {
		size += len(it) + 5
	}
	out := binary.AppendUvarint(make([]byte, 0, size), uint64(len(items)))
	for _, it := range items {
		out = putBytes(out, it)
	}
	return out
}

// decodeList copies the elements out of pool memory.
func decodeList(in []byte) [][]byte {
	n, k := binary.Uvarint(in)
	if k <= 0 {
		return nil
	}
	in = in[k:]
	items := make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		b, rest, ok := getBytes(in)
		if !ok {
			break
		}
		items = append(items, append([]byte(nil), b...))
		in = rest
	}
	return items
}

func listLen(in []byte) int64 {
	n, k := binary.Uvarint(in)
	if k <= 0 {
		return 0
	}
	return int64(n)
}

// hashv is a hash (and, with empty values, a set) in insertion order.
type hashv struct {
	keys  []string
	vals  map[string][]byte
	index map[string]int
}

func newHash() *hashv { return newHashCap(0) }

// newHashCap is an empty hash with room for n fields.
func newHashCap(n int) *hashv {
	return &hashv{keys: make([]string, 0, n), vals: make(map[string][]byte, n), index: make(map[string]int, n)}
}

// decodeHash decodes a compact hash (decodeList's encoding, field and
// value alternating) into Go memory: each field copied once into its
// string, each value into its own slice (nothing aliases in, a pool
// value the command may replace and free), the maps sized once. HSET
// decodes the whole compact value each time (up to hash-max-listpack-
// entries fields): the maps' growth and a second copy of each field were
// most of it.
func decodeHash(in []byte) *hashv {
	n, k := binary.Uvarint(in)
	if k <= 0 {
		return newHash()
	}
	in = in[k:]
	h := newHashCap(int(min(n/2, 1<<16)))
	for i := uint64(0); i+1 < n; i += 2 {
		f, rest, ok := getBytes(in)
		if !ok {
			break
		}
		v, rest, ok := getBytes(rest)
		if !ok {
			break
		}
		h.set(string(f), append([]byte(nil), v...))
		in = rest
	}
	return h
}

func (h *hashv) encode() []byte {
	items := make([][]byte, 0, 2*len(h.keys))
	for _, k := range h.keys {
		items = append(items, []byte(k), h.vals[k])
	}
	return encodeList(items)
}

// set returns true if the field is new.
func (h *hashv) set(k string, v []byte) bool {
	_, had := h.vals[k]
	h.vals[k] = v
	if !had {
		h.index[k] = len(h.keys)
		h.keys = append(h.keys, k)
	}
	return !had
}

func (h *hashv) del(k string) bool {
	i, ok := h.index[k]
	if !ok {
		return false
	}
	delete(h.vals, k)
	delete(h.index, k)
	h.keys = append(h.keys[:i], h.keys[i+1:]...)
	for j := i; j < len(h.keys); j++ {
		h.index[h.keys[j]] = j
	}
	return true
}

func (h *hashv) has(k string) bool { _, ok := h.vals[k]; return ok }
func (h *hashv) n() int            { return len(h.keys) }

// sets reuse hashv with nil values.
func decodeSet(in []byte) *hashv {
	h := newHash()
	for _, it := range decodeList(in) {
		h.set(string(it), nil)
	}
	return h
}

func (h *hashv) encodeSet() []byte {
	items := make([][]byte, len(h.keys))
	for i, k := range h.keys {
		items[i] = []byte(k)
	}
	return encodeList(items)
}

// zsetv is a sorted set: elements ordered by (score, member).
type zsetv struct {
	els    []zel
	scores map[string]float64
}

type zel struct {
	score  float64
	member string
}

func zless(a, b zel) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.member < b.member
}

func decodeZSet(in []byte) *zsetv {
	z := &zsetv{scores: map[string]float64{}}
	for _, it := range decodeList(in) {
		if len(it) < 8 {
			continue
		}
		s := math.Float64frombits(binary.LittleEndian.Uint64(it))
		m := string(it[8:])
		z.els = append(z.els, zel{s, m})
		z.scores[m] = s
	}
	return z
}

func (z *zsetv) encode() []byte {
	items := make([][]byte, len(z.els))
	for i, e := range z.els {
		b := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(e.member)), math.Float64bits(e.score))
		items[i] = append(b, e.member...)
	}
	return encodeList(items)
}

func (z *zsetv) pos(e zel) int {
	return sort.Search(len(z.els), func(i int) bool { return !zless(z.els[i], e) })
}

// add sets member's score; true if it is new.
func (z *zsetv) add(m string, s float64) bool {
	old, had := z.scores[m]
	if had {
		if old == s {
			return false
		}
		z.rem(m)
	}
	e := zel{s, m}
	i := z.pos(e)
	z.els = append(z.els, zel{})
	copy(z.els[i+1:], z.els[i:])
	z.els[i] = e
	z.scores[m] = s
	return !had
}

func (z *zsetv) rem(m string) bool {
	s, ok := z.scores[m]
	if !ok {
		return false
	}
	i := z.pos(zel{s, m})
	z.els = append(z.els[:i], z.els[i+1:]...)
	delete(z.scores, m)
	return true
}

func (z *zsetv) rank(m string) (int, bool) {
	s, ok := z.scores[m]
	if !ok {
		return 0, false
	}
	return z.pos(zel{s, m}), true
}
