// cmd_zset.go: sorted-set commands over zobj (pzset.go: compact while
// small, a skiplist after): ZADD (NX/XX/GT/LT/CH/INCR), ZREM, ZSCORE,
// ZMSCORE, ZINCRBY, ZCARD, ZCOUNT, ZRANGE (index, BYSCORE, BYLEX, REV,
// LIMIT, WITHSCORES), ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
// ZREVRANGEBYLEX, ZREVRANGE, ZRANK, ZREVRANK, ZPOPMIN/ZPOPMAX, ZSCAN.
//
// Crash behaviour: changes happen inside the command's region; a big set
// is changed in place (O(log n) logged bytes per member).
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
		return zread(x, func(z *zobj) {
			if s, ok := z.score(x.args[2]); ok {
				x.w.Double(s)
			} else {
				x.w.Null()
			}
		})
	})
	reg("zmscore", -3, "r", k1, func(x *ctx) error {
		return zread(x, func(z *zobj) {
			x.w.Array(len(x.args) - 2)
			for _, m := range x.args[2:] {
				if s, ok := z.score(m); ok {
					x.w.Double(s)
				} else {
					x.w.Null()
				}
			}
		})
	})
	reg("zcard", 2, "r", k1, func(x *ctx) error { return zread(x, func(z *zobj) { x.w.Int(z.n()) }) })
	reg("zcount", 4, "r", k1, cmdZCount)
	reg("zrange", -4, "r", k1, func(x *ctx) error { return zrange(x, zq{}) })
	reg("zrevrange", -4, "r", k1, func(x *ctx) error { return zrange(x, zq{rev: true, fixed: true}) })
	reg("zrangebyscore", -4, "r", k1, func(x *ctx) error { return zrange(x, zq{by: 's', fixed: true}) })
	reg("zrevrangebyscore", -4, "r", k1, func(x *ctx) error { return zrange(x, zq{by: 's', rev: true, fixed: true}) })
	reg("zrangebylex", -4, "r", k1, func(x *ctx) error { return zrange(x, zq{by: 'l', fixed: true}) })
	reg("zrevrangebylex", -4, "r", k1, func(x *ctx) error { return zrange(x, zq{by: 'l', rev: true, fixed: true}) })
	reg("zrank", 3, "r", k1, func(x *ctx) error { return zrank(x, false) })
	reg("zrevrank", 3, "r", k1, func(x *ctx) error { return zrank(x, true) })
	reg("zpopmin", -2, "w", k1, func(x *ctx) error { return zpop(x, false) })
	reg("zpopmax", -2, "w", k1, func(x *ctx) error { return zpop(x, true) })
	reg("zscan", -3, "r", k1, func(x *ctx) error { return collScan(x, tZSet) })
}

// zset reads a whole sorted set into Go values (for the set algebra).
func (x *ctx) zset(k []byte) (*zsetv, *pEntry, bool, error) {
	return typedValue(x, k, tZSet, func() *zsetv { return &zsetv{scores: map[string]float64{}} }, loadZSet)
}

func zread(x *ctx, fn func(z *zobj)) error {
	z, ok, err := x.zsetObj(x.args[1])
	if err == nil && ok {
		fn(z)
	}
	return err
}

func cmdZAdd(x *ctx) error {
	var nx, xx, gt, lt, ch, incr bool
	i := 2
	for ; i < len(x.args); i++ {
		if a := x.args[i]; len(a) == 0 || a[0]|0x20 < 'a' || a[0]|0x20 > 'z' {
			break // a score (every option is a word): no lower-case copy
		}
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
		s, ok := parseScore(rest[j])
		if !ok {
			x.w.Err(errNotFloat)
			return nil
		}
		scores = append(scores, s)
	}
	z, ok, err := x.zsetObj(x.args[1])
	if err != nil || !ok {
		return err
	}
	added, changed := int64(0), int64(0)
	var last float64
	skipped := false
	for j := 0; j < len(rest); j += 2 {
		m, s := rest[j+1], scores[j/2]
		old, had, e := z.find(m)
		if incr && had {
			s += old
			if math.IsNaN(s) {
				x.w.Err("ERR resulting score is not a number (NaN)")
				return z.done()
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
		if _, err := z.addAt(m, s, e); err != nil {
			return err
		}
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
	return z.done()
}

func cmdZRem(x *ctx) error {
	z, ok, err := x.zsetObj(x.args[1])
	if err != nil || !ok {
		return err
	}
	n := int64(0)
	for _, m := range x.args[2:] {
		gone, err := z.rem(m)
		if err != nil {
			return err
		}
		n += b2i(gone)
	}
	x.w.Int(n)
	return z.done()
}

// scoreBound parses a ZRANGEBYSCORE bound: "(1.5" exclusive, "-inf", ...
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

// scoreRanks is the rank range [start, end) of the scores in [lo, hi].
func (o *zobj) scoreRanks(lo, hi float64, lox, hix bool) (int64, int64) {
	start := o.count(func(s float64, _ []byte) bool { return s < lo || (lox && s == lo) })
	end := o.count(func(s float64, _ []byte) bool { return s < hi || (!hix && s == hi) })
	return start, max(start, end)
}

// lexRanks is the rank range [start, end) of the members in [lo, hi]
// (meaningful when all scores are equal, as in Redis).
func (o *zobj) lexRanks(lo, hi lexBound) (int64, int64) {
	start := o.count(func(_ float64, m []byte) bool { return !lo.below(string(m)) })
	end := o.count(func(_ float64, m []byte) bool { return hi.above(string(m)) })
	return start, max(start, end)
}

// window is up to cnt (< 0: all) elements of the rank range [start, end)
// after skipping off, from the low end or (rev) the high end.
func (o *zobj) window(start, end int64, rev bool, off, cnt int64) []zel {
	if off < 0 {
		return nil
	}
	n := end - start - off
	if n <= 0 {
		return nil
	}
	if cnt >= 0 && cnt < n {
		n = cnt
	}
	if !rev {
		return o.slice(start+off, start+off+n)
	}
	els := o.slice(end-off-n, end-off)
	reverse(els)
	return els
}

func cmdZCount(x *ctx) error {
	lo, lox, ok1 := scoreBound(x.args[2])
	hi, hix, ok2 := scoreBound(x.args[3])
	if !ok1 || !ok2 {
		x.w.Err("ERR min or max is not a float")
		return nil
	}
	return zread(x, func(z *zobj) {
		a, b := z.scoreRanks(lo, hi, lox, hix)
		x.w.Int(b - a)
	})
}

// zq is a ZRANGE query: by 0 (rank), 's' (score) or 'l' (lex); fixed: a
// Z*RANGEBY* command whose kind and direction its name sets.
type zq struct {
	by              byte
	rev, fixed      bool
	withScores, lim bool
	off, cnt        int64
}

// parseZq reads ZRANGE's options from args (after key min max).
func parseZq(x *ctx, q zq, args [][]byte, store bool) (zq, bool) {
	q.cnt = -1
	for i := 0; i < len(args); i++ {
		switch {
		case !store && eq(args[i], "withscores"):
			q.withScores = true
		case eq(args[i], "limit") && i+2 < len(args):
			o, ok1 := parseInt(args[i+1])
			c, ok2 := parseInt(args[i+2])
			if !ok1 || !ok2 {
				x.w.Err(errNotInt)
				return q, false
			}
			q.lim, q.off, q.cnt = true, o, c
			i += 2
		case !q.fixed && !q.rev && eq(args[i], "rev"):
			q.rev = true
		case !q.fixed && q.by == 0 && eq(args[i], "bylex"):
			q.by = 'l'
		case !q.fixed && q.by == 0 && eq(args[i], "byscore"):
			q.by = 's'
		default:
			x.w.Err(errSyntax)
			return q, false
		}
	}
	if q.lim && q.cnt != -1 && q.by == 0 {
		x.w.Err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
		return q, false
	}
	if q.withScores && q.by == 'l' {
		x.w.Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
		return q, false
	}
	return q, true
}

// zquery runs a ZRANGE-family query on key k with bounds a, b.
func zquery(x *ctx, q zq, k, a, b []byte) ([]zel, bool, error) {
	if q.rev && q.by != 0 {
		a, b = b, a
	}
	var pick func(z *zobj) []zel
	switch q.by {
	case 's':
		lo, lox, ok1 := scoreBound(a)
		hi, hix, ok2 := scoreBound(b)
		if !ok1 || !ok2 {
			x.w.Err("ERR min or max is not a float")
			return nil, false, nil
		}
		pick = func(z *zobj) []zel {
			s, e := z.scoreRanks(lo, hi, lox, hix)
			return z.window(s, e, q.rev, q.off, q.cnt)
		}
	case 'l':
		lo, hi := parseLex(a), parseLex(b)
		if !lo.good || !hi.good {
			x.w.Err("ERR min or max not valid string range item")
			return nil, false, nil
		}
		pick = func(z *zobj) []zel {
			s, e := z.lexRanks(lo, hi)
			return z.window(s, e, q.rev, q.off, q.cnt)
		}
	default:
		start, ok1 := parseInt(a)
		stop, ok2 := parseInt(b)
		if !ok1 || !ok2 {
			x.w.Err(errNotInt)
			return nil, false, nil
		}
		pick = func(z *zobj) []zel {
			n := z.n()
			lo, hi := span(start, stop, n)
			if lo > hi {
				return nil
			}
			if !q.rev {
				return z.slice(lo, hi+1)
			}
			els := z.slice(n-1-hi, n-lo)
			reverse(els)
			return els
		}
	}
	z, ok, err := x.zsetObj(k)
	if err != nil || !ok {
		return nil, false, err
	}
	return pick(z), true, nil
}

func zrange(x *ctx, q zq) error {
	q, ok := parseZq(x, q, x.args[4:], false)
	if !ok {
		return nil
	}
	els, ok, err := zquery(x, q, x.args[1], x.args[2], x.args[3])
	if err != nil || !ok {
		return err
	}
	writeZ(x, els, q.withScores)
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
	return zread(x, func(z *zobj) {
		r, ok := z.rank(x.args[2])
		if !ok {
			x.w.Null()
			return
		}
		if rev {
			r = z.n() - 1 - r
		}
		x.w.Int(r)
	})
}

// zpopN removes and returns up to n elements from the low (or high) end.
func zpopN(z *zobj, n int64, max bool) ([]zel, error) {
	n = min(n, z.n())
	var got []zel
	if max {
		got = z.slice(z.n()-n, z.n())
		reverse(got)
	} else {
		got = z.slice(0, n)
	}
	for _, g := range got {
		if _, err := z.rem([]byte(g.member)); err != nil {
			return nil, err
		}
	}
	return got, z.done()
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
	z, ok, err := x.zsetObj(x.args[1])
	if err != nil || !ok {
		return err
	}
	got, err := zpopN(z, count, max)
	if err != nil {
		return err
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
	return nil
}

// parseScore is parseFloat for a ZADD's score, with a fast path for a
// decimal integer of up to 15 digits (redis-benchmark's scores), which a
// float64 holds exactly: the value strconv.ParseFloat gives (-0 for
// "-0"), without its general parse.
func parseScore(b []byte) (float64, bool) {
	d := b
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 {
		return parseFloat(b)
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return parseFloat(b)
		}
		n = n*10 + int64(c-'0')
	}
	if len(d) < len(b) {
		return -float64(n), true
	}
	return float64(n), true
}
