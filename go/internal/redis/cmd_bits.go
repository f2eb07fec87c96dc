// cmd_bits.go: string commands that address bits or compare strings:
// SETBIT, GETBIT, LCS (LEN / IDX / MINMATCHLEN / WITHMATCHLEN, as Redis
// 7.0's dynamic programme, ranges emitted in the same order).
//
// Invariants: SETBIT changes one byte of the string where it is, or moves
// the string once when it grows past its spare capacity (rawstr.go); both
// are logged in the command's region, so a crash leaves the old value or
// the new one.
package redis

import "strings"

// maxBitOffset is Redis's limit: a string of at most 512 MB.
const maxBitOffset = 4*1024*1024*1024 - 1

func init() {
	reg("setbit", 4, "w", k1, cmdSetBit)
	reg("getbit", 3, "r", k1, cmdGetBit)
	reg("lcs", -3, "r", [3]int{1, 2, 1}, cmdLCS)
}

func bitOffset(x *ctx, i int) (int64, bool) {
	off, ok := parseInt(x.args[i])
	if !ok || off < 0 || off > maxBitOffset {
		x.w.Err("ERR bit offset is not an integer or out of range")
		return 0, false
	}
	return off, true
}

func cmdSetBit(x *ctx) error {
	off, ok := bitOffset(x, 2)
	if !ok {
		return nil
	}
	bit := string(x.args[3])
	if bit != "0" && bit != "1" {
		x.w.Err("ERR bit is not an integer or out of range")
		return nil
	}
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	i := int(off / 8)
	var by byte
	if i < len(v) {
		by = v[i]
	}
	mask := byte(1) << (7 - uint(off%8))
	old := int64(0)
	if by&mask != 0 {
		old = 1
	}
	if bit == "1" {
		by |= mask
	} else {
		by &^= mask
	}
	if err := x.rawWrite(x.args[1], e, max(len(v), i+1), i, []byte{by}); err != nil {
		return err
	}
	x.w.Int(old)
	return nil
}

func cmdGetBit(x *ctx) error {
	off, ok := bitOffset(x, 2)
	if !ok {
		return nil
	}
	v, _, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	if off/8 >= int64(len(v)) {
		x.w.Int(0)
		return nil
	}
	x.w.Int(int64(v[off/8]>>(7-uint(off%8))) & 1)
	return nil
}

// lcsOpts are LCS's options.
type lcsOpts struct {
	getLen, getIdx, withLen bool
	minLen                  int64
}

func lcsArgs(x *ctx) (o lcsOpts, ok bool) {
	for i := 3; i < len(x.args); i++ {
		switch strings.ToLower(string(x.args[i])) {
		case "idx":
			o.getIdx = true
		case "len":
			o.getLen = true
		case "withmatchlen":
			o.withLen = true
		case "minmatchlen":
			if i+1 >= len(x.args) {
				x.w.Err(errSyntax)
				return o, false
			}
			i++
			if o.minLen, ok = x.intArg(i); !ok {
				return o, false
			}
			o.minLen = max(o.minLen, 0)
		default:
			x.w.Err(errSyntax)
			return o, false
		}
	}
	if o.getLen && o.getIdx {
		x.w.Err("ERR If you want both the length and indexes, please just use IDX.")
		return o, false
	}
	return o, true
}

// lcsValue reads an LCS operand: a missing key is the empty string.
func lcsValue(x *ctx, k []byte) ([]byte, bool, error) {
	e, err := x.lookup(k)
	if err != nil || e == nil {
		return nil, err == nil, err
	}
	if e.Type != tString {
		x.w.Err("ERR The specified keys must contain string values")
		return nil, false, nil
	}
	return e.val(), true, nil
}

func cmdLCS(x *ctx) error {
	a, ok, err := lcsValue(x, x.args[1])
	if err != nil || !ok {
		return err
	}
	b, ok, err := lcsValue(x, x.args[2])
	if err != nil || !ok {
		return err
	}
	o, ok := lcsArgs(x)
	if !ok {
		return nil
	}
	if int64(len(a)+1)*int64(len(b)+1) > maxBulk/4 {
		x.w.Err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
		return nil
	}
	t := lcsTable(a, b)
	n := t.at(len(a), len(b))
	if o.getLen {
		x.w.Int(int64(n))
		return nil
	}
	if !o.getIdx {
		x.w.Bulk(t.backtrack(a, b, o, nil))
		return nil
	}
	var ranges []lcsRange
	t.backtrack(a, b, o, &ranges)
	x.w.Map(2)
	x.w.BulkS("matches")
	x.w.Array(len(ranges))
	for _, r := range ranges {
		x.w.Array(2 + int(b2i(o.withLen)))
		x.w.Array(2)
		x.w.Int(r.a0)
		x.w.Int(r.a1)
		x.w.Array(2)
		x.w.Int(r.b0)
		x.w.Int(r.b1)
		if o.withLen {
			x.w.Int(r.a1 - r.a0 + 1)
		}
	}
	x.w.BulkS("len")
	x.w.Int(int64(n))
	return nil
}

// lcsTab is the (len(a)+1) x (len(b)+1) table of LCS lengths of prefixes.
type lcsTab struct {
	cols int
	v    []uint32
}

func (t *lcsTab) at(i, j int) uint32 { return t.v[i*t.cols+j] }

func lcsTable(a, b []byte) *lcsTab {
	t := &lcsTab{cols: len(b) + 1, v: make([]uint32, (len(a)+1)*(len(b)+1))}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				t.v[i*t.cols+j] = t.at(i-1, j-1) + 1
			default:
				t.v[i*t.cols+j] = max(t.at(i-1, j), t.at(i, j-1))
			}
		}
	}
	return t
}

type lcsRange struct{ a0, a1, b0, b1 int64 }

// backtrack walks the table from the end (as Redis does), returning the
// common string, and the matching ranges of at least minLen if ranges is
// not nil.
func (t *lcsTab) backtrack(a, b []byte, o lcsOpts, ranges *[]lcsRange) []byte {
	idx := t.at(len(a), len(b))
	out := make([]byte, idx)
	i, j := len(a), len(b)
	none := int64(len(a))
	cur := lcsRange{a0: none}
	for i > 0 && j > 0 {
		emit := false
		if a[i-1] == b[j-1] {
			out[idx-1] = a[i-1]
			switch {
			case cur.a0 == none:
				cur = lcsRange{a0: int64(i - 1), a1: int64(i - 1), b0: int64(j - 1), b1: int64(j - 1)}
			case cur.a0 == int64(i) && cur.b0 == int64(j):
				cur.a0--
				cur.b0--
			default:
				emit = true
			}
			emit = emit || cur.a0 == 0 || cur.b0 == 0
			idx--
			i--
			j--
		} else {
			if t.at(i-1, j) > t.at(i, j-1) {
				i--
			} else {
				j--
			}
			emit = cur.a0 != none
		}
		if emit {
			if ranges != nil && (o.minLen == 0 || cur.a1-cur.a0+1 >= o.minLen) {
				*ranges = append(*ranges, cur)
			}
			cur.a0 = none
		}
	}
	return out
}
