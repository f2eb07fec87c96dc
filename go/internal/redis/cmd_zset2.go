// cmd_zset2.go: LPOS and the lexicographic and multi-key sorted-set
// commands: ZLEXCOUNT, ZRANGESTORE, ZREMRANGEBY{SCORE,RANK,LEX},
// ZUNION/ZINTER/ZDIFF[STORE] (WEIGHTS, AGGREGATE SUM|MIN|MAX), ZINTERCARD.
//
// Crash behaviour: the destination is written inside the command's region.
package redis

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

func init() {
	reg("lpos", -3, "r", k1, cmdLPos)
	reg("zlexcount", 4, "r", k1, cmdZLexCount)
	reg("zunionstore", -4, "w", k1, func(x *ctx) error { return zstore(x, 'u') })
	reg("zinterstore", -4, "w", k1, func(x *ctx) error { return zstore(x, 'i') })
	reg("zdiffstore", -4, "w", k1, func(x *ctx) error { return zstore(x, 'd') })
	reg("zunion", -3, "r", k0, func(x *ctx) error { return zstore(x, 'u') })
	reg("zinter", -3, "r", k0, func(x *ctx) error { return zstore(x, 'i') })
	reg("zintercard", -3, "r", k0, cmdZInterCard)
	reg("zrandmember", -2, "r", k1, cmdZRandMember)
	reg("zdiff", -3, "r", k0, func(x *ctx) error { return zstore(x, 'd') })
	reg("zremrangebyscore", 4, "w", k1, func(x *ctx) error { return zremRange(x, 's') })
	reg("zremrangebyrank", 4, "w", k1, func(x *ctx) error { return zremRange(x, 'r') })
	reg("zremrangebylex", 4, "w", k1, func(x *ctx) error { return zremRange(x, 'l') })
	reg("zrangestore", -5, "w", [3]int{1, 2, 1}, cmdZRangeStore)
}

func cmdLPos(x *ctx) error {
	rank, count, maxlen, hasCount := int64(1), int64(1), int64(0), false
	for i := 3; i < len(x.args); i += 2 {
		if i+1 >= len(x.args) {
			x.w.Err(errSyntax)
			return nil
		}
		n, ok := parseInt(x.args[i+1])
		if !ok {
			x.w.Err(errNotInt)
			return nil
		}
		switch strings.ToLower(string(x.args[i])) {
		case "rank":
			if n == 0 || n == math.MinInt64 {
				x.w.Err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
				return nil
			}
			rank = n
		case "count":
			if n < 0 {
				x.w.Err("ERR COUNT can't be negative")
				return nil
			}
			count, hasCount = n, true
		case "maxlen":
			if n < 0 {
				x.w.Err("ERR MAXLEN can't be negative")
				return nil
			}
			maxlen = n
		default:
			x.w.Err(errSyntax)
			return nil
		}
	}
	l, _, ok, err := x.list(x.args[1])
	if err != nil || !ok {
		return err
	}
	var found []int64
	skip := rank
	if skip < 0 {
		skip = -skip
	}
	for j := 0; j < len(l) && (maxlen == 0 || int64(j) < maxlen); j++ {
		i := j
		if rank < 0 {
			i = len(l) - 1 - j
		}
		if string(l[i]) != string(x.args[2]) {
			continue
		}
		if skip > 1 {
			skip--
			continue
		}
		found = append(found, int64(i))
		if count != 0 && int64(len(found)) >= count {
			break
		}
	}
	if !hasCount {
		if len(found) == 0 {
			x.w.Null()
		} else {
			x.w.Int(found[0])
		}
		return nil
	}
	x.w.Array(len(found))
	for _, f := range found {
		x.w.Int(f)
	}
	return nil
}

// lexBound parses "[a", "(a", "-", "+"; inf is -1 for "-", +1 for "+".
type lexBound struct {
	v    string
	ex   bool
	inf  int
	good bool
}

func parseLex(b []byte) lexBound {
	switch {
	case string(b) == "-":
		return lexBound{inf: -1, good: true}
	case string(b) == "+":
		return lexBound{inf: 1, good: true}
	case len(b) > 0 && (b[0] == '(' || b[0] == '['):
		return lexBound{v: string(b[1:]), ex: b[0] == '(', good: true}
	}
	return lexBound{}
}

func (lo lexBound) below(m string) bool { // m is above the lower bound
	switch lo.inf {
	case -1:
		return true
	case 1:
		return false
	}
	return m > lo.v || (!lo.ex && m == lo.v)
}

func (hi lexBound) above(m string) bool {
	switch hi.inf {
	case 1:
		return true
	case -1:
		return false
	}
	return m < hi.v || (!hi.ex && m == hi.v)
}

func cmdZLexCount(x *ctx) error {
	lo, hi := parseLex(x.args[2]), parseLex(x.args[3])
	if !lo.good || !hi.good {
		x.w.Err("ERR min or max not valid string range item")
		return nil
	}
	return zread(x, func(z *zobj) {
		a, b := z.lexRanks(lo, hi)
		x.w.Int(b - a)
	})
}

// readZOrSet reads a sorted set, or a set with every score 1 (as Redis).
func (x *ctx) readZOrSet(k []byte) (*zsetv, bool, error) {
	e, err := x.lookup(k)
	if err != nil {
		return nil, false, err
	}
	z := &zsetv{scores: map[string]float64{}}
	if e == nil {
		return z, true, nil
	}
	switch e.Type {
	case tZSet:
		return loadZSet(e), true, nil
	case tSet:
		for _, m := range loadSet(e).keys {
			z.add(m, 1)
		}
		return z, true, nil
	}
	x.w.Err(errWrongType)
	return nil, false, nil
}

// zstore is Z{UNION,INTER,DIFF}[STORE]: the STORE forms have a
// destination before numkeys; the others may end in WITHSCORES.
func zstore(x *ctx, op byte) error {
	store := strings.HasSuffix(x.name, "store")
	ni := 2
	if !store {
		ni = 1
	}
	n, ok := parseInt(x.args[ni])
	if !ok {
		x.w.Err(errNotInt)
		return nil
	}
	if n < 1 {
		x.w.Err("ERR at least 1 input key is needed for '" + x.name + "' command")
		return nil
	}
	if int64(len(x.args)-ni-1) < n {
		x.w.Err("ERR Number of keys can't be greater than number of args")
		return nil
	}
	keys := x.args[ni+1 : ni+1+int(n)]
	withScores := false
	weights := make([]float64, n)
	for i := range weights {
		weights[i] = 1
	}
	agg := "sum"
	for i := ni + 1 + int(n); i < len(x.args); i++ {
		switch {
		case !store && eq(x.args[i], "withscores"):
			withScores = true
		case op != 'd' && eq(x.args[i], "weights") && i+int(n) < len(x.args):
			for j := range weights {
				w, ok := parseFloat(x.args[i+1+j])
				if !ok {
					x.w.Err("ERR weight value is not a float")
					return nil
				}
				weights[j] = w
			}
			i += int(n)
		case op != 'd' && eq(x.args[i], "aggregate") && i+1 < len(x.args):
			agg = strings.ToLower(string(x.args[i+1]))
			if agg != "sum" && agg != "min" && agg != "max" {
				x.w.Err(errSyntax)
				return nil
			}
			i++
		default:
			x.w.Err(errSyntax)
			return nil
		}
	}
	acc := map[string]float64{}
	seen := map[string]int{}
	inFirst := map[string]bool{}
	for i, k := range keys {
		z, ok, err := x.readZOrSet(k)
		if err != nil || !ok {
			return err
		}
		for _, el := range z.els {
			if i == 0 {
				inFirst[el.member] = true
			}
			if op == 'd' {
				if i == 0 {
					acc[el.member] = el.score
				}
				seen[el.member]++
				continue
			}
			s := el.score * weights[i]
			if math.IsNaN(s) {
				s = 0
			}
			if c, had := acc[el.member]; had {
				switch agg {
				case "sum":
					s += c
					if math.IsNaN(s) {
						s = 0
					}
				case "min":
					s = math.Min(s, c)
				case "max":
					s = math.Max(s, c)
				}
			}
			acc[el.member] = s
			seen[el.member]++
		}
	}
	out := &zsetv{scores: map[string]float64{}}
	members := make([]string, 0, len(acc))
	for m := range acc {
		if op == 'u' || (op == 'i' && seen[m] == len(keys)) || (op == 'd' && seen[m] == 1 && inFirst[m]) {
			members = append(members, m)
		}
	}
	sort.Strings(members)
	for _, m := range members {
		out.add(m, acc[m])
	}
	if !store {
		writeZ(x, out.els, withScores)
		return nil
	}
	return storeZ(x, x.args[1], out)
}

func storeZ(x *ctx, dst []byte, z *zsetv) error {
	x.w.Int(int64(len(z.els)))
	if len(z.els) == 0 {
		_, err := x.del(dst)
		return err
	}
	err := x.putValue(dst, tZSet, z)
	return err
}

func cmdZRangeStore(x *ctx) error {
	q, ok := parseZq(x, zq{}, x.args[5:], true)
	if !ok {
		return nil
	}
	els, ok, err := zquery(x, q, x.args[2], x.args[3], x.args[4])
	if err != nil || !ok {
		return err
	}
	z := &zsetv{scores: map[string]float64{}}
	for _, el := range els {
		z.add(el.member, el.score)
	}
	return storeZ(x, x.args[1], z)
}

// parseZReply reads back a RESP2 flat member/score array.
func parseZReply(b []byte) ([]zel, bool) {
	var items []string
	for len(b) > 0 {
		i := strings.Index(string(b), "\r\n")
		if i < 0 {
			return nil, false
		}
		line := string(b[:i])
		b = b[i+2:]
		if line[0] == '$' {
			n := 0
			for _, c := range line[1:] {
				n = n*10 + int(c-'0')
			}
			items = append(items, string(b[:n]))
			b = b[n+2:]
		}
	}
	var els []zel
	for i := 0; i+1 < len(items); i += 2 {
		s, ok := parseFloat([]byte(items[i+1]))
		if !ok {
			return nil, false
		}
		els = append(els, zel{s, items[i]})
	}
	return els, true
}

// zremRange removes by score, rank or lex range: O(k log n) for k removed.
func zremRange(x *ctx, by byte) error {
	var ranks func(z *zobj) (int64, int64)
	switch by {
	case 's':
		lo, lox, ok1 := scoreBound(x.args[2])
		hi, hix, ok2 := scoreBound(x.args[3])
		if !ok1 || !ok2 {
			x.w.Err("ERR min or max is not a float")
			return nil
		}
		ranks = func(z *zobj) (int64, int64) { return z.scoreRanks(lo, hi, lox, hix) }
	case 'l':
		lo, hi := parseLex(x.args[2]), parseLex(x.args[3])
		if !lo.good || !hi.good {
			x.w.Err("ERR min or max not valid string range item")
			return nil
		}
		ranks = func(z *zobj) (int64, int64) { return z.lexRanks(lo, hi) }
	default:
		start, ok1 := parseInt(x.args[2])
		stop, ok2 := parseInt(x.args[3])
		if !ok1 || !ok2 {
			x.w.Err(errNotInt)
			return nil
		}
		ranks = func(z *zobj) (int64, int64) {
			lo, hi := span(start, stop, z.n())
			return lo, max(lo, hi+1)
		}
	}
	z, ok, err := x.zsetObj(x.args[1])
	if err != nil || !ok {
		return err
	}
	gone := z.slice(ranks(z))
	for _, el := range gone {
		if _, err := z.rem([]byte(el.member)); err != nil {
			return err
		}
	}
	x.w.Int(int64(len(gone)))
	return z.done()
}

func cmdZInterCard(x *ctx) error {
	n, ok := x.intArg(1)
	if !ok {
		return nil
	}
	if n <= 0 {
		x.w.Err("ERR at least 1 input key is needed for 'zintercard' command")
		return nil
	}
	if int64(len(x.args)-2) < n {
		x.w.Err(errSyntax)
		return nil
	}
	limit := int64(0)
	rest := x.args[2+n:]
	if len(rest) == 2 && eq(rest[0], "limit") {
		l, ok := parseInt(rest[1])
		if !ok || l < 0 {
			x.w.Err("ERR LIMIT can't be negative")
			return nil
		}
		limit = l
	} else if len(rest) != 0 {
		x.w.Err(errSyntax)
		return nil
	}
	count := map[string]int{}
	for _, k := range x.args[2 : 2+n] {
		z, ok, err := x.readZOrSet(k)
		if err != nil || !ok {
			return err
		}
		for _, el := range z.els {
			count[el.member]++
		}
	}
	c := int64(0)
	for _, v := range count {
		if v == int(n) {
			c++
		}
	}
	if limit > 0 {
		c = min(c, limit)
	}
	x.w.Int(c)
	return nil
}

// cmdZRandMember: ZRANDMEMBER key [count [WITHSCORES]], as HRANDFIELD
// (count >= 0 distinct members, < 0 |count| with repeats).
func cmdZRandMember(x *ctx) error {
	n, withs, ok := randCountArgs(x, "withscores")
	if !ok {
		return nil
	}
	z, _, ok, err := x.zset(x.args[1])
	if err != nil || !ok {
		return err
	}
	keys := make([]string, 0, len(z.scores))
	for m := range z.scores {
		keys = append(keys, m)
	}
	if len(x.args) == 2 {
		if len(keys) == 0 {
			x.w.Null()
		} else {
			x.w.BulkS(keys[rand.IntN(len(keys))])
		}
		return nil
	}
	replyPicks(x.w, randomPicks(keys, n), withs, func(m string) { x.w.Double(z.scores[m]) })
	return nil
}
