// rdb.go: Redis's RDB value encoding, for DUMP and RESTORE. A payload is
// one value (a type byte and its encoding), the RDB version (2 bytes,
// little endian) and a CRC-64/Jones of everything before (8 bytes, little
// endian), as Redis 7.0 writes it.
//
// DUMP writes the plain encodings every Redis since 2.x loads (a string,
// RDB_TYPE_LIST, SET, HASH, ZSET_2 with binary scores) under version 10
// (Redis 7.0). RESTORE reads those and what redis-server 7.0 DUMPs: strings
// with the integer and LZF encodings, quicklist-2 lists of listpacks,
// intsets, listpack hashes and sorted sets.
//
// Invariants: parsing never panics on bad input: every read checks its
// bounds and a malformed payload is errBadRDB.
package redis

import (
	"encoding/binary"
	"errors"
	"hash/crc64"
	"math"
	"strconv"
)

const rdbVersion = 10

// RDB object types.
const (
	rdbString          = 0
	rdbList            = 1
	rdbSet             = 2
	rdbZSet            = 3
	rdbHash            = 4
	rdbZSet2           = 5
	rdbHashZipmap      = 9
	rdbListZiplist     = 10
	rdbSetIntset       = 11
	rdbZSetZiplist     = 12
	rdbHashZiplist     = 13
	rdbListQuicklist   = 14
	rdbHashListpack    = 16
	rdbZSetListpack    = 17
	rdbListQuicklist2  = 18
	rdbQuicklistPlain  = 1
	rdbQuicklistPacked = 2
)

var errBadRDB = errors.New("bad RDB payload")

// crcTable is CRC-64/Jones (reflected polynomial 0x95ac9329ac4bc9b5), as
// Redis's crc64.c; Redis applies no initial or final inversion.
var crcTable = crc64.MakeTable(0x95ac9329ac4bc9b5)

func crc64Jones(crc uint64, b []byte) uint64 {
	for _, c := range b {
		crc = crcTable[byte(crc)^c] ^ (crc >> 8)
	}
	return crc
}

// ---- writing

func rdbLen(out []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(out, byte(n))
	case n < 1<<14:
		return append(out, byte(n>>8)|0x40, byte(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(out, 0x80), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(out, 0x81), n)
}

func rdbStr(out, s []byte) []byte { return append(rdbLen(out, uint64(len(s))), s...) }

// dumpValue is the DUMP payload of an entry.
func dumpValue(e *pEntry) []byte {
	var out []byte
	switch e.Type {
	case tString:
		out = rdbStr([]byte{rdbString}, e.val())
	case tList:
		items := loadList(e)
		out = rdbLen([]byte{rdbList}, uint64(len(items)))
		for _, it := range items {
			out = rdbStr(out, it)
		}
	case tSet:
		h := loadSet(e)
		out = rdbLen([]byte{rdbSet}, uint64(len(h.keys)))
		for _, k := range h.keys {
			out = rdbStr(out, []byte(k))
		}
	case tHash:
		h := loadHash(e)
		out = rdbLen([]byte{rdbHash}, uint64(len(h.keys)))
		for _, k := range h.keys {
			out = rdbStr(rdbStr(out, []byte(k)), h.vals[k])
		}
	case tZSet:
		z := loadZSet(e)
		out = rdbLen([]byte{rdbZSet2}, uint64(len(z.els)))
		for _, el := range z.els {
			out = rdbStr(out, []byte(el.member))
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(el.score))
		}
	}
	out = binary.LittleEndian.AppendUint16(out, rdbVersion)
	return binary.LittleEndian.AppendUint64(out, crc64Jones(0, out))
}

// ---- reading

// checkPayload verifies the version and checksum; it returns the value.
func checkPayload(p []byte) ([]byte, bool) {
	if len(p) < 10 {
		return nil, false
	}
	body, foot := p[:len(p)-10], p[len(p)-10:]
	if binary.LittleEndian.Uint16(foot) > rdbVersion {
		return nil, false
	}
	if binary.LittleEndian.Uint64(foot[2:]) != crc64Jones(0, p[:len(p)-8]) {
		return nil, false
	}
	return body, true
}

type rdbReader struct {
	b   []byte
	bad bool
}

func (r *rdbReader) take(n uint64) []byte {
	if r.bad || uint64(len(r.b)) < n {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *rdbReader) byte1() byte {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return b[0]
}

// length reads a length; special is true (and n the encoding) for 0b11.
func (r *rdbReader) length() (n uint64, special bool) {
	c := r.byte1()
	switch c >> 6 {
	case 0:
		return uint64(c & 0x3f), false
	case 1:
		return uint64(c&0x3f)<<8 | uint64(r.byte1()), false
	case 3:
		return uint64(c & 0x3f), true
	}
	switch c {
	case 0x80:
		if b := r.take(4); b != nil {
			return uint64(binary.BigEndian.Uint32(b)), false
		}
	case 0x81:
		if b := r.take(8); b != nil {
			return binary.BigEndian.Uint64(b), false
		}
	default:
		r.bad = true
	}
	return 0, false
}

// count reads a length used as an element count (bounded by the input).
func (r *rdbReader) count() int {
	n, special := r.length()
	if special || n > uint64(len(r.b)) {
		r.bad = true
		return 0
	}
	return int(n)
}

// str reads a string in any of its encodings.
func (r *rdbReader) str() []byte {
	n, special := r.length()
	if !special {
		return append([]byte(nil), r.take(n)...)
	}
	switch n {
	case 0:
		return strconv.AppendInt(nil, int64(int8(r.byte1())), 10)
	case 1:
		if b := r.take(2); b != nil {
			return strconv.AppendInt(nil, int64(int16(binary.LittleEndian.Uint16(b))), 10)
		}
	case 2:
		if b := r.take(4); b != nil {
			return strconv.AppendInt(nil, int64(int32(binary.LittleEndian.Uint32(b))), 10)
		}
	case 3:
		clen, _ := r.length()
		ulen, _ := r.length()
		if ulen > 1<<30 {
			r.bad = true
			return nil
		}
		out, ok := lzfDecompress(r.take(clen), int(ulen))
		r.bad = r.bad || !ok
		return out
	default:
		r.bad = true
	}
	return nil
}

// lzfDecompress is liblzf's lzf_decompress (the format Redis compresses
// RDB strings with).
func lzfDecompress(in []byte, ulen int) ([]byte, bool) {
	out := make([]byte, 0, ulen)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 32 { // a literal run of ctrl+1 bytes
			if i+ctrl+1 > len(in) || len(out)+ctrl+1 > ulen {
				return nil, false
			}
			out = append(out, in[i:i+ctrl+1]...)
			i += ctrl + 1
			continue
		}
		n := ctrl >> 5
		if n == 7 {
			if i >= len(in) {
				return nil, false
			}
			n += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, false
		}
		ref := len(out) - ((ctrl&0x1f)<<8 | int(in[i])) - 1
		i++
		if ref < 0 || len(out)+n+2 > ulen {
			return nil, false
		}
		for k := 0; k < n+2; k++ { // may overlap: byte by byte
			out = append(out, out[ref+k])
		}
	}
	return out, len(out) == ulen
}

// restoreValue parses a value; t is the engram-redis type, v its Go value
// (as writeValue takes it).
func restoreValue(body []byte) (t int64, v any, ok bool) {
	r := &rdbReader{b: body}
	typ := r.byte1()
	switch typ {
	case rdbString:
		t, v = tString, r.str()
	case rdbList, rdbSet:
		n := r.count()
		items := make([][]byte, 0, n)
		for i := 0; i < n && !r.bad; i++ {
			items = append(items, r.str())
		}
		t, v = tList, items
		if typ == rdbSet {
			t, v = tSet, setOf(items)
		}
	case rdbHash:
		n := r.count()
		h := newHash()
		for i := 0; i < n && !r.bad; i++ {
			f := r.str()
			h.set(string(f), r.str())
		}
		t, v = tHash, h
	case rdbZSet, rdbZSet2:
		t, v = tZSet, r.zset(typ == rdbZSet2)
	case rdbSetIntset:
		items, good := intsetItems(r.str())
		r.bad = r.bad || !good
		t, v = tSet, setOf(items)
	case rdbListQuicklist2:
		t, v = tList, r.quicklist2()
	case rdbHashListpack, rdbZSetListpack:
		items, good := listpackItems(r.str())
		r.bad = r.bad || !good || len(items)%2 != 0
		t, v = pairsValue(typ == rdbZSetListpack, items, r)
	default:
		return 0, nil, false // ziplist-era and stream encodings: not supported
	}
	return t, v, !r.bad && len(r.b) == 0
}

func setOf(items [][]byte) *hashv {
	h := newHash()
	for _, it := range items {
		h.set(string(it), nil)
	}
	return h
}

func (r *rdbReader) zset(binaryScores bool) *zsetv {
	n := r.count()
	z := &zsetv{scores: map[string]float64{}}
	for i := 0; i < n && !r.bad; i++ {
		m := r.str()
		var s float64
		if binaryScores {
			if b := r.take(8); b != nil {
				s = math.Float64frombits(binary.LittleEndian.Uint64(b))
			}
		} else {
			l := r.byte1()
			switch l {
			case 253:
				s = math.NaN()
			case 254:
				s = math.Inf(1)
			case 255:
				s = math.Inf(-1)
			default:
				f, ok := parseFloat(r.take(uint64(l)))
				r.bad = r.bad || !ok
				s = f
			}
		}
		if math.IsNaN(s) {
			r.bad = true
		}
		z.add(string(m), s)
	}
	return z
}

func (r *rdbReader) quicklist2() [][]byte {
	n := r.count()
	var items [][]byte
	for i := 0; i < n && !r.bad; i++ {
		container, _ := r.length()
		blob := r.str()
		switch container {
		case rdbQuicklistPlain:
			items = append(items, blob)
		case rdbQuicklistPacked:
			got, ok := listpackItems(blob)
			r.bad = r.bad || !ok
			items = append(items, got...)
		default:
			r.bad = true
		}
	}
	return items
}

func pairsValue(zset bool, items [][]byte, r *rdbReader) (int64, any) {
	if !zset {
		h := newHash()
		for i := 0; i+1 < len(items); i += 2 {
			h.set(string(items[i]), items[i+1])
		}
		return tHash, h
	}
	z := &zsetv{scores: map[string]float64{}}
	for i := 0; i+1 < len(items); i += 2 {
		s, ok := parseFloat(items[i+1])
		r.bad = r.bad || !ok
		z.add(string(items[i]), s)
	}
	return tZSet, z
}

// intsetItems decodes an intset blob: encoding (2, 4 or 8), count, ints.
func intsetItems(b []byte) ([][]byte, bool) {
	if len(b) < 8 {
		return nil, false
	}
	enc, n := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
	b = b[8:]
	if (enc != 2 && enc != 4 && enc != 8) || uint64(len(b)) != uint64(n)*uint64(enc) {
		return nil, false
	}
	items := make([][]byte, 0, n)
	for i := 0; i < int(n); i++ {
		var v int64
		switch enc {
		case 2:
			v = int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
		case 4:
			v = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		default:
			v = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		items = append(items, strconv.AppendInt(nil, v, 10))
	}
	return items, true
}

// listpackItems decodes a listpack: total bytes (4), count (2), entries
// (each followed by its back length), 0xFF.
func listpackItems(b []byte) ([][]byte, bool) {
	if len(b) < 7 || binary.LittleEndian.Uint32(b) != uint32(len(b)) || b[len(b)-1] != 0xff {
		return nil, false
	}
	p := b[6 : len(b)-1]
	var items [][]byte
	for len(p) > 0 {
		item, size, ok := lpEntry(p)
		if !ok {
			return nil, false
		}
		size += lpBackLen(size)
		if size > len(p) {
			return nil, false
		}
		items = append(items, item)
		p = p[size:]
	}
	return items, true
}

func lpBackLen(n int) int {
	switch {
	case n < 128:
		return 1
	case n < 16384:
		return 2
	case n < 2097152:
		return 3
	case n < 268435456:
		return 4
	}
	return 5
}

// lpEntry decodes one listpack entry: its value and encoded size.
func lpEntry(p []byte) ([]byte, int, bool) {
	c := p[0]
	need := func(n int) bool { return len(p) >= n }
	sint := func(v uint64, bits uint) []byte {
		x := int64(v<<(64-bits)) >> (64 - bits)
		return strconv.AppendInt(nil, x, 10)
	}
	switch {
	case c&0x80 == 0:
		return strconv.AppendInt(nil, int64(c), 10), 1, true
	case c&0xc0 == 0x80:
		n := int(c & 0x3f)
		if !need(1 + n) {
			return nil, 0, false
		}
		return append([]byte(nil), p[1:1+n]...), 1 + n, true
	case c&0xe0 == 0xc0:
		if !need(2) {
			return nil, 0, false
		}
		return sint(uint64(c&0x1f)<<8|uint64(p[1]), 13), 2, true
	case c&0xf0 == 0xe0:
		if !need(2) {
			return nil, 0, false
		}
		n := int(c&0x0f)<<8 | int(p[1])
		if !need(2 + n) {
			return nil, 0, false
		}
		return append([]byte(nil), p[2:2+n]...), 2 + n, true
	case c == 0xf0:
		if !need(5) {
			return nil, 0, false
		}
		n := int(binary.LittleEndian.Uint32(p[1:]))
		if n < 0 || !need(5+n) {
			return nil, 0, false
		}
		return append([]byte(nil), p[5:5+n]...), 5 + n, true
	case c >= 0xf1 && c <= 0xf4:
		w := [...]int{2, 3, 4, 8}[c-0xf1]
		if !need(1 + w) {
			return nil, 0, false
		}
		var v uint64
		for i := w - 1; i >= 0; i-- {
			v = v<<8 | uint64(p[1+i])
		}
		return sint(v, uint(8*w)), 1 + w, true
	}
	return nil, 0, false
}
