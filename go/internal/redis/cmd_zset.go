// cmd_zset.go: sorted-set commands over codec.go's (score, member) ordered
// encoding: ZADD (NX/XX/GT/LT/CH/INCR), ZREM, ZSCORE, ZMSCORE, ZINCRBY,
// ZCARD, ZCOUNT, ZRANGE (index, BYSCORE, REV, LIMIT, WITHSCORES),
// ZRANGEBYSCORE, ZREVRANGE, ZRANK, ZREVRANK, ZPOPMIN/ZPOPMAX, ZSCAN.
//
// Crash behaviour: the set is rewritten as a whole inside the region.
package redis

import (
	"math"
	"strings"
)

func init() {
	reg("zadd", -4, "w", k1, cmdZAdd)
	reg("zincrby", 4, "w", k1, func(x *ctx) error {
		x.args = [][]byte{x.args[0], x.args[1], []byte("incr"), x.args[2], x.args[3]}
		return cmdZAdd(x)
	})
	reg("zrem", -3, "w", k1, cmdZRem)
	reg("zscore", 3, "r", k1, func(x *ctx) error {
		return zread(x, func(z *zsetv) {
			if s, ok := z.scores[string(x.args[2])]; ok {
				x.w.Double(s)
			} else {
				x.w.Null()
			}
		})
	})
	reg("zmscore", -3, "r", k1, func(x *ctx) error {
		return zread(x, func(z *zsetv) {
			x.w.Array(len(x.args) - 2)
			for _, m := range x.args[2:] {
				if s, ok := z.scores[string(m)]; ok {
					x.w.Double(s)
				} else {
					x.w.Null()
				}
			}
		})
	})
	reg("zcard", 2, "r", k1, func(x *ctx) error { return zread(x, func(z *zsetv) { x.w.Int(int64(len(z.els))) }) })
	reg("zcount", 4, "r", k1, cmdZCount)
	reg("zrange", -4, "r", k1, func(x *ctx) error { return zrange(x, false, false) })
	reg("zrevrange", -4, "r", k1, func(x *ctx) error { return zrange(x, true, false) })
	reg("zrangebyscore", -4, "r", k1, func(x *ctx) error { return zrange(x, false, true) })
	reg("zrevrangebyscore", -4, "r", k1, func(x *ctx) error { return zrange(x, true, true) })
	reg("zrank", 3, "r", k1, func(x *ctx) error { return zrank(x, false) })
	reg("zrevrank", 3, "r", k1, func(x *ctx) error { return zrank(x, true) })
	reg("zpopmin", -2, "w", k1, func(x *ctx) error { return zpop(x, false) })
	reg("zpopmax", -2, "w", k1, func(x *ctx) error { return zpop(x, true) })
	reg("zscan", -3, "r", k1, func(x *ctx) error { return collScan(x, tZSet) })
}

func (x *ctx) zset(k []byte) (*zsetv, *pEntry, bool, error) {
	return typedValue(x, k, tZSet, func() *zsetv { return &zsetv{scores: map[string]float64{}} }, decodeZSet)
}

func zread(x *ctx, fn func(z *zsetv)) error {
	z, _, ok, err := x.zset(x.args[1])
	if err == nil && ok {
		fn(z)
	}
	return err
}

func cmdZAdd(x *ctx) error {
	var nx, xx, gt, lt, ch, incr bool
	i := 2
	for ; i < len(x.args); i++ {
		switch strings.ToLower(string(x.args[i])) {
		case "nx":
			nx = true
		case "xx":
			xx = true
		case "gt":
			gt = true
		case "lt":
			lt = true
		case "ch":
			ch = true
		case "incr":
			incr = true
		default:
			goto pairs
		}
	}
pairs:
	rest := x.args[i:]
	if len(rest) == 0 || len(rest)%2 != 0 {
		x.w.Err(errSyntax)
		return nil
	}
	if nx && xx {
		x.w.Err("ERR XX and NX options at the same time are not compatible")
		return nil
	}
	if (gt && nx) || (lt && nx) || (gt && lt) {
		x.w.Err("ERR GT, LT, and/or NX options at the same time are not compatible")
		return nil
	}
	if incr && len(rest) > 2 {
		x.w.Err("ERR INCR option supports a single increment-element pair")
		return nil
	}
	scores := make([]float64, 0, len(rest)/2)
	for j := 0; j < len(rest); j += 2 {
		s, ok := parseFloat(rest[j])
		if !ok {
			x.w.Err(errNotFloat)
			return nil
		}
		scores = append(scores, s)
	}
	z, e, ok, err := x.zset(x.args[1])
	if err != nil || !ok {
		return err
	}
	added, changed := int64(0), int64(0)
	var last float64
	skipped := false
	for j := 0; j < len(rest); j += 2 {
		m, s := string(rest[j+1]), scores[j/2]
		old, had := z.scores[m]
		if incr && had {
			s += old
			if math.IsNaN(s) {
				x.w.Err("ERR resulting score is not a number (NaN)")
				return nil
			}
		}
		if (nx && had) || (xx && !had) || (had && gt && s <= old) || (had && lt && s >= old) {
			skipped = true
			continue
		}
		last = s
		if !had {
			added++
		} else if old != s {
			changed++
		}
		z.add(m, s)
	}
	switch {
	case incr && skipped:
		x.w.Null()
	case incr:
		x.w.Double(last)
	case ch:
		x.w.Int(added + changed)
	default:
		x.w.Int(added)
	}
	if added+changed == 0 {
		return nil
	}
	return x.store(x.args[1], tZSet, e, z.encode(), false)
}

func cmdZRem(x *ctx) error {
	z, e, ok, err := x.zset(x.args[1])
	if err != nil || !ok {
		return err
	}
	n := int64(0)
	for _, m := range x.args[2:] {
		n += b2i(z.rem(string(m)))
	}
	x.w.Int(n)
	if n == 0 {
		return nil
	}
	return x.store(x.args[1], tZSet, e, z.encode(), len(z.els) == 0)
}

// scoreRange parses a ZRANGEBYSCORE bound: "(1.5" exclusive, "-inf", ...
func scoreBound(b []byte) (float64, bool, bool) {
	ex := len(b) > 0 && b[0] == '('
	if ex {
		b = b[1:]
	}
	f, ok := parseFloat(b)
	return f, ex, ok
}

func inRange(s, lo, hi float64, lox, hix bool) bool {
	return (s > lo || (!lox && s == lo)) && (s < hi || (!hix && s == hi))
}

func cmdZCount(x *ctx) error {
	lo, lox, ok1 := scoreBound(x.args[2])
	hi, hix, ok2 := scoreBound(x.args[3])
	if !ok1 || !ok2 {
		x.w.Err("ERR min or max is not a float")
		return nil
	}
	return zread(x, func(z *zsetv) {
		n := int64(0)
		for _, el := range z.els {
			n += b2i(inRange(el.score, lo, hi, lox, hix))
		}
		x.w.Int(n)
	})
}

func zrange(x *ctx, rev, byScore bool) error {
	withScores, limit, off, cnt := false, false, int64(0), int64(-1)
	for i := 4; i < len(x.args); i++ {
		switch {
		case eq(x.args[i], "withscores"):
			withScores = true
		case eq(x.args[i], "byscore") && x.name == "zrange":
			byScore = true
		case eq(x.args[i], "rev") && x.name == "zrange":
			rev = true
		case eq(x.args[i], "limit") && i+2 < len(x.args):
			o, ok1 := parseInt(x.args[i+1])
			c, ok2 := parseInt(x.args[i+2])
			if !ok1 || !ok2 {
				x.w.Err(errNotInt)
				return nil
			}
			limit, off, cnt = true, o, c
			i += 2
		default:
			x.w.Err(errSyntax)
			return nil
		}
	}
	if limit && !byScore {
		x.w.Err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
		return nil
	}
	a, b := x.args[2], x.args[3]
	var els []zel
	z, _, ok, err := x.zset(x.args[1])
	if err != nil || !ok {
		return err
	}
	if byScore {
		if rev && (x.name == "zrevrangebyscore" || x.name == "zrange") {
			a, b = b, a
		}
		lo, lox, ok1 := scoreBound(a)
		hi, hix, ok2 := scoreBound(b)
		if !ok1 || !ok2 {
			x.w.Err("ERR min or max is not a float")
			return nil
		}
		for _, el := range z.els {
			if inRange(el.score, lo, hi, lox, hix) {
				els = append(els, el)
			}
		}
		if rev {
			reverse(els)
		}
		if off < 0 {
			els = nil
		} else if off < int64(len(els)) {
			els = els[off:]
		} else {
			els = nil
		}
		if cnt >= 0 && cnt < int64(len(els)) {
			els = els[:cnt]
		}
	} else {
		start, ok1 := parseInt(a)
		stop, ok2 := parseInt(b)
		if !ok1 || !ok2 {
			x.w.Err(errNotInt)
			return nil
		}
		all := append([]zel(nil), z.els...)
		if rev {
			reverse(all)
		}
		lo, hi := span(start, stop, int64(len(all)))
		if lo <= hi {
			els = all[lo : hi+1]
		}
	}
	writeZ(x, els, withScores)
	return nil
}

func reverse(e []zel) {
	for i, j := 0, len(e)-1; i < j; i, j = i+1, j-1 {
		e[i], e[j] = e[j], e[i]
	}
}

func writeZ(x *ctx, els []zel, withScores bool) {
	if withScores && x.w.proto == 3 {
		x.w.Array(len(els))
		for _, el := range els {
			x.w.Array(2)
			x.w.BulkS(el.member)
			x.w.Double(el.score)
		}
		return
	}
	if withScores {
		x.w.Array(2 * len(els))
	} else {
		x.w.Array(len(els))
	}
	for _, el := range els {
		x.w.BulkS(el.member)
		if withScores {
			x.w.Double(el.score)
		}
	}
}

func zrank(x *ctx, rev bool) error {
	return zread(x, func(z *zsetv) {
		r, ok := z.rank(string(x.args[2]))
		if !ok {
			x.w.Null()
			return
		}
		if rev {
			r = len(z.els) - 1 - r
		}
		x.w.Int(int64(r))
	})
}

func zpop(x *ctx, max bool) error {
	count := int64(1)
	if len(x.args) > 3 {
		x.w.Err(errSyntax)
		return nil
	}
	if len(x.args) == 3 {
		n, ok := parseInt(x.args[2])
		if !ok || n < 0 {
			x.w.Err("ERR value is out of range, must be positive")
			return nil
		}
		count = n
	}
	z, e, ok, err := x.zset(x.args[1])
	if err != nil || !ok {
		return err
	}
	n := min(int(count), len(z.els))
	var got []zel
	if max {
		for i := 0; i < n; i++ {
			got = append(got, z.els[len(z.els)-1-i])
		}
	} else {
		got = append(got, z.els[:n]...)
	}
	for _, g := range got {
		z.rem(g.member)
	}
	if x.w.proto == 3 && len(x.args) == 2 {
		if len(got) == 0 {
			x.w.Array(0)
		} else {
			x.w.Array(2)
			x.w.BulkS(got[0].member)
			x.w.Double(got[0].score)
		}
	} else {
		writeZ(x, got, true)
	}
	if n == 0 {
		return nil
	}
	return x.store(x.args[1], tZSet, e, z.encode(), len(z.els) == 0)
}
