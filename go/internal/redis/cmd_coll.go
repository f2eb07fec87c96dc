// cmd_coll.go: hash, list and set commands over the compact encodings of
// codec.go (decode, change, write back in the command's region).
//
// Crash behaviour: a collection is replaced as a whole inside the region,
// so it is never seen half-changed.
package redis

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

func init() {
	reg("hset", -4, "w", k1, func(x *ctx) error { return cmdHSet(x, true) })
	reg("hmset", -4, "w", k1, func(x *ctx) error { return cmdHSet(x, false) })
	reg("hsetnx", 4, "w", k1, cmdHSetNX)
	reg("hget", 3, "r", k1, cmdHGet)
	reg("hmget", -3, "r", k1, cmdHMGet)
	reg("hdel", -3, "w", k1, cmdHDel)
	reg("hexists", 3, "r", k1, func(x *ctx) error { return hread(x, func(h *hobj) { x.w.Int(b2i(h.has(x.args[2]))) }) })
	reg("hlen", 2, "r", k1, func(x *ctx) error { return hread(x, func(h *hobj) { x.w.Int(int64(h.n())) }) })
	reg("hstrlen", 3, "r", k1, func(x *ctx) error {
		return hread(x, func(h *hobj) { v, _ := h.get(x.args[2]); x.w.Int(int64(len(v))) })
	})
	reg("hkeys", 2, "r", k1, func(x *ctx) error { return hall(x, true, false) })
	reg("hvals", 2, "r", k1, func(x *ctx) error { return hall(x, false, true) })
	reg("hgetall", 2, "r", k1, func(x *ctx) error { return hall(x, true, true) })
	reg("hincrby", 4, "w", k1, cmdHIncrBy)
	reg("hincrbyfloat", 4, "w", k1, cmdHIncrByFloat)
	reg("hrandfield", -2, "r", k1, cmdHRandField)

	reg("lpush", -3, "w", k1, func(x *ctx) error { return push(x, true, false) })
	reg("rpush", -3, "w", k1, func(x *ctx) error { return push(x, false, false) })
	reg("lpushx", -3, "w", k1, func(x *ctx) error { return push(x, true, true) })
	reg("rpushx", -3, "w", k1, func(x *ctx) error { return push(x, false, true) })
	reg("lpop", -2, "w", k1, func(x *ctx) error { return pop(x, true) })
	reg("rpop", -2, "w", k1, func(x *ctx) error { return pop(x, false) })
	reg("llen", 2, "r", k1, cmdLLen)
	reg("lrange", 4, "r", k1, cmdLRange)
	reg("lindex", 3, "r", k1, cmdLIndex)
	reg("lset", 4, "w", k1, cmdLSet)
	reg("lrem", 4, "w", k1, cmdLRem)
	reg("ltrim", 4, "w", k1, cmdLTrim)
	reg("linsert", 5, "w", k1, cmdLInsert)
	reg("lmove", 5, "w", [3]int{1, 2, 1}, cmdLMove)
	reg("rpoplpush", 3, "w", [3]int{1, 2, 1}, cmdLMove)
	reg("blpop", -3, "w", [3]int{1, -2, 1}, func(x *ctx) error { return bpop(x, true) })
	reg("brpop", -3, "w", [3]int{1, -2, 1}, func(x *ctx) error { return bpop(x, false) })
	reg("blmove", 6, "w", [3]int{1, 2, 1}, cmdBLMove)
	reg("brpoplpush", 4, "w", [3]int{1, 2, 1}, cmdBLMove)

	reg("sadd", -3, "w", k1, cmdSAdd)
	reg("srem", -3, "w", k1, cmdSRem)
	reg("sismember", 3, "r", k1, func(x *ctx) error { return sread(x, func(s *hobj) { x.w.Int(b2i(s.has(x.args[2]))) }) })
	reg("smismember", -3, "r", k1, func(x *ctx) error {
		return sread(x, func(s *hobj) {
			x.w.Array(len(x.args) - 2)
			for _, m := range x.args[2:] {
				x.w.Int(b2i(s.has(m)))
			}
		})
	})
	reg("scard", 2, "r", k1, func(x *ctx) error { return sread(x, func(s *hobj) { x.w.Int(int64(s.n())) }) })
	reg("smembers", 2, "r", k1, func(x *ctx) error { return sread(x, func(s *hobj) { replySet(x, s.keys()) }) })
	reg("spop", -2, "w", k1, cmdSPop)
	reg("srandmember", -2, "r", k1, cmdSRandMember)
	reg("smove", 4, "w", [3]int{1, 2, 1}, cmdSMove)
	reg("sinter", -2, "r", kAll, func(x *ctx) error { return setop(x, 'i', false) })
	reg("sunion", -2, "r", kAll, func(x *ctx) error { return setop(x, 'u', false) })
	reg("sdiff", -2, "r", kAll, func(x *ctx) error { return setop(x, 'd', false) })
	reg("sinterstore", -3, "w", kAll, func(x *ctx) error { return setop(x, 'i', true) })
	reg("sunionstore", -3, "w", kAll, func(x *ctx) error { return setop(x, 'u', true) })
	reg("sdiffstore", -3, "w", kAll, func(x *ctx) error { return setop(x, 'd', true) })
	reg("sintercard", -3, "r", k0, cmdSInterCard)
	reg("sscan", -3, "r", k1, func(x *ctx) error { return collScan(x, tSet) })
	reg("hscan", -3, "r", k1, func(x *ctx) error { return collScan(x, tHash) })
}

// ---- hashes

func hread(x *ctx, fn func(h *hobj)) error {
	h, ok, err := x.hashObj(x.args[1], tHash)
	if err == nil && ok {
		fn(h)
	}
	return err
}

func cmdHSet(x *ctx, count bool) error {
	if len(x.args)%2 != 0 {
		x.w.Err("ERR wrong number of arguments for '" + x.name + "' command")
		return nil
	}
	h, ok, err := x.hashObj(x.args[1], tHash)
	if err != nil || !ok {
		return err
	}
	n := int64(0)
	for i := 2; i < len(x.args); i += 2 {
		isNew, err := h.set(x.args[i], x.args[i+1])
		if err != nil {
			return err
		}
		n += b2i(isNew)
	}
	if err := h.done(); err != nil {
		return err
	}
	if count {
		x.w.Int(n)
	} else {
		x.w.OK()
	}
	return nil
}

func cmdHSetNX(x *ctx) error {
	h, ok, err := x.hashObj(x.args[1], tHash)
	if err != nil || !ok {
		return err
	}
	if h.has(x.args[2]) {
		x.w.Int(0)
		return nil
	}
	if _, err := h.set(x.args[2], x.args[3]); err != nil {
		return err
	}
	x.w.Int(1)
	return h.done()
}

func cmdHGet(x *ctx) error {
	return hread(x, func(h *hobj) {
		if v, ok := h.get(x.args[2]); ok {
			x.w.Bulk(v)
		} else {
			x.w.Null()
		}
	})
}

func cmdHMGet(x *ctx) error {
	return hread(x, func(h *hobj) {
		x.w.Array(len(x.args) - 2)
		for _, f := range x.args[2:] {
			if v, ok := h.get(f); ok {
				x.w.Bulk(v)
			} else {
				x.w.Null()
			}
		}
	})
}

func cmdHDel(x *ctx) error {
	h, ok, err := x.hashObj(x.args[1], tHash)
	if err != nil || !ok {
		return err
	}
	n := int64(0)
	for _, f := range x.args[2:] {
		gone, err := h.del(f)
		if err != nil {
			return err
		}
		n += b2i(gone)
	}
	x.w.Int(n)
	return h.done()
}

func hall(x *ctx, keys, vals bool) error {
	return hread(x, func(h *hobj) {
		if keys && vals {
			x.w.Map(h.n())
		} else {
			x.w.Array(h.n())
		}
		h.each(func(f, v []byte) {
			if keys {
				x.w.Bulk(f)
			}
			if vals {
				x.w.Bulk(v)
			}
		})
	})
}

func cmdHIncrBy(x *ctx) error {
	by, ok := x.intArg(3)
	if !ok {
		return nil
	}
	h, ok, err := x.hashObj(x.args[1], tHash)
	if err != nil || !ok {
		return err
	}
	var cur int64
	if v, had := h.get(x.args[2]); had {
		if cur, ok = parseInt(v); !ok {
			x.w.Err("ERR hash value is not an integer")
			return nil
		}
	}
	if (by > 0 && cur > math.MaxInt64-by) || (by < 0 && cur < math.MinInt64-by) {
		x.w.Err(errOverflow)
		return nil
	}
	cur += by
	if _, err := h.set(x.args[2], strconv.AppendInt(nil, cur, 10)); err != nil {
		return err
	}
	x.w.Int(cur)
	return h.done()
}

func cmdHIncrByFloat(x *ctx) error {
	by, ok := x.floatArg(3)
	if !ok {
		return nil
	}
	if math.IsInf(by, 0) || math.IsNaN(by) {
		x.w.Err("ERR value is NaN or Infinity")
		return nil
	}
	h, ok, err := x.hashObj(x.args[1], tHash)
	if err != nil || !ok {
		return err
	}
	var cur float64
	if v, had := h.get(x.args[2]); had {
		if cur, ok = parseFloat(v); !ok {
			x.w.Err("ERR hash value is not a float")
			return nil
		}
	}
	cur += by
	if math.IsInf(cur, 0) || math.IsNaN(cur) {
		x.w.Err("ERR increment would produce NaN or Infinity")
		return nil
	}
	nv := []byte(strconv.FormatFloat(cur, 'f', -1, 64))
	if _, err := h.set(x.args[2], nv); err != nil {
		return err
	}
	x.w.Bulk(nv)
	return h.done()
}

// cmdHRandField: HRANDFIELD key [count [WITHVALUES]], as Redis 7.0.15:
// the count and the options are checked before the key is looked up (so a
// bad count is reported for a missing key or a key of another type too);
// count >= 0 picks distinct fields, < 0 |count| with repeats.
func cmdHRandField(x *ctx) error {
	n, withv, ok := randCountArgs(x, "withvalues")
	if !ok {
		return nil
	}
	return hread(x, func(h *hobj) {
		if len(x.args) == 2 {
			if h.n() == 0 {
				x.w.Null()
			} else {
				x.w.BulkS(h.keys()[rand.IntN(h.n())])
			}
			return
		}
		replyPicks(x.w, randomPicks(h.keys(), n), withv, func(k string) {
			v, _ := h.get([]byte(k))
			x.w.Bulk(v)
		})
	})
}

// maxRandPicks bounds a negative count of HRANDFIELD / ZRANDMEMBER (picks
// with repeats): Redis streams |count| replies whatever their number; here
// the reply is built in memory, so a count beyond this is refused with
// Redis's out-of-range error rather than exhausting the heap.
const maxRandPicks = 1 << 24

// randCountArgs checks HRANDFIELD's / ZRANDMEMBER's arguments after the
// key as Redis 7.0.15 does (getRangeLongFromObjectOrReply over
// [-LONG_MAX, LONG_MAX], then the option word opt, then the WITHVALUES /
// WITHSCORES range LONG_MAX/2); it writes the error and returns ok false
// on bad ones. With no count it returns n 0.
func randCountArgs(x *ctx, opt string) (n int64, with bool, ok bool) {
	if len(x.args) < 3 {
		return 0, false, true
	}
	if n, ok = x.intArg(2); !ok {
		return 0, false, false
	}
	if n == math.MinInt64 {
		x.w.Err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
		return 0, false, false
	}
	if len(x.args) > 4 || (len(x.args) == 4 && !eq(x.args[3], opt)) {
		x.w.Err(errSyntax)
		return 0, false, false
	}
	with = len(x.args) == 4
	if (with && (n < -math.MaxInt64/2 || n > math.MaxInt64/2)) || n < -maxRandPicks {
		x.w.Err("ERR value is out of range")
		return 0, false, false
	}
	return n, with, true
}

// replyPicks answers HRANDFIELD / ZRANDMEMBER: the picked names, each with
// its value (val writes it) when withv: pairs in RESP3, flat in RESP2.
func replyPicks(w *W, picks []string, withv bool, val func(k string)) {
	if withv && w.proto == 2 {
		w.Array(2 * len(picks))
	} else {
		w.Array(len(picks))
	}
	for _, k := range picks {
		if withv && w.proto == 3 {
			w.Array(2)
		}
		w.BulkS(k)
		if withv {
			val(k)
		}
	}
}

// randomPicks: n >= 0 distinct (at most all), n < 0 |n| with repeats.
func randomPicks(keys []string, n int64) []string {
	if len(keys) == 0 || n < -maxRandPicks {
		return nil
	}
	if n < 0 {
		out := make([]string, -n)
		for i := range out {
			out[i] = keys[rand.IntN(len(keys))]
		}
		return out
	}
	perm := rand.Perm(len(keys))
	out := make([]string, 0, min(int(n), len(keys)))
	for _, i := range perm[:min(int(n), len(keys))] {
		out = append(out, keys[i])
	}
	return out
}

// ---- lists (a quicklist each: plist.go)

// list reads a whole list into Go values (for the O(n) commands).
func (x *ctx) list(k []byte) ([][]byte, *pEntry, bool, error) {
	return typedValue(x, k, tList, func() [][]byte { return nil }, loadList)
}

// pushList pushes vals onto k at one end (creating the key if e is nil)
// and returns the new length.
func (x *ctx) pushList(k []byte, e *pEntry, vals [][]byte, left bool) (int64, error) {
	if e == nil {
		ne, err := x.put(k, tList, nil, false)
		if err != nil {
			return 0, err
		}
		c, err := newListColl(x.tx)
		if err != nil {
			return 0, err
		}
		if err := x.tx.Log(&ne.Coll); err != nil {
			return 0, err
		}
		ne.Coll, e = c, ne
	} else {
		x.touch(k)
	}
	for _, v := range vals {
		if err := e.Coll.lpush(x.tx, v, left); err != nil {
			return 0, err
		}
	}
	x.markReady(k)
	return e.Coll.Len, nil
}

// popList pops up to n elements from one end of k's list (e is its
// entry) and deletes the key if that emptied it.
func (x *ctx) popList(k []byte, e *pEntry, n int64, left bool) ([][]byte, error) {
	x.touch(k)
	var out [][]byte
	for i := int64(0); i < n && e.Coll.Len > 0; i++ {
		v, err := e.Coll.lpop(x.tx, left)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if e.Coll.Len == 0 {
		_, err := x.dict().remove(x.tx, k)
		return out, err
	}
	return out, nil
}

func push(x *ctx, left, onlyIfExists bool) error {
	e, wrong, err := x.typed(x.args[1], tList)
	if err != nil || wrong {
		return err
	}
	if onlyIfExists && e == nil {
		x.w.Int(0)
		return nil
	}
	n, err := x.pushList(x.args[1], e, x.args[2:], left)
	if err != nil {
		return err
	}
	x.w.Int(n)
	return nil
}

func pop(x *ctx, left bool) error {
	count, hasCount := int64(1), len(x.args) > 2
	if len(x.args) > 3 {
		x.w.Err("ERR wrong number of arguments for '" + x.name + "' command")
		return nil
	}
	if hasCount {
		n, ok := parseInt(x.args[2])
		if !ok || n < 0 {
			x.w.Err("ERR value is out of range, must be positive")
			return nil
		}
		count = n
	}
	e, wrong, err := x.typed(x.args[1], tList)
	if err != nil || wrong {
		return err
	}
	if e == nil {
		if hasCount {
			x.w.NullArray()
		} else {
			x.w.Null()
		}
		return nil
	}
	got, err := x.popList(x.args[1], e, count, left)
	if err != nil {
		return err
	}
	if hasCount {
		x.w.Array(len(got))
	}
	for _, v := range got {
		x.w.Bulk(v)
	}
	return nil
}

func cmdLLen(x *ctx) error {
	e, wrong, err := x.typed(x.args[1], tList)
	if err != nil || wrong {
		return err
	}
	if e == nil {
		x.w.Int(0)
	} else {
		x.w.Int(e.Coll.Len)
	}
	return nil
}

// span normalises a Redis [start, stop] over n elements; empty if lo > hi.
func span(start, stop, n int64) (int64, int64) {
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop += n
	}
	return start, min(stop, n-1)
}

func cmdLRange(x *ctx) error {
	start, ok1 := parseInt(x.args[2])
	stop, ok2 := parseInt(x.args[3])
	if !ok1 || !ok2 {
		x.w.Err(errNotInt)
		return nil
	}
	e, wrong, err := x.typed(x.args[1], tList)
	if err != nil || wrong {
		return err
	}
	if e == nil {
		x.w.Array(0)
		return nil
	}
	lo, hi := span(start, stop, e.Coll.Len)
	if lo > hi {
		x.w.Array(0)
		return nil
	}
	x.w.Array(int(hi - lo + 1))
	e.Coll.lrange(lo, hi, func(v []byte) { x.w.Bulk(v) })
	return nil
}

// listIndex resolves a (negative) index of k's list; e nil if no key.
func listIndex(x *ctx, i int64) (e *pEntry, j int64, in, wrong bool, err error) {
	e, wrong, err = x.typed(x.args[1], tList)
	if err != nil || wrong || e == nil {
		return nil, 0, false, wrong, err
	}
	if i < 0 {
		i += e.Coll.Len
	}
	return e, i, i >= 0 && i < e.Coll.Len, false, nil
}

func cmdLIndex(x *ctx) error {
	i, ok := x.intArg(2)
	if !ok {
		return nil
	}
	e, i, in, wrong, err := listIndex(x, i)
	if err != nil || wrong {
		return err
	}
	if !in {
		x.w.Null()
	} else {
		x.w.Bulk(e.Coll.lget(i))
	}
	return nil
}

func cmdLSet(x *ctx) error {
	i, ok := x.intArg(2)
	if !ok {
		return nil
	}
	e, i, in, wrong, err := listIndex(x, i)
	if err != nil || wrong {
		return err
	}
	if e == nil {
		x.w.Err(errNoKey)
		return nil
	}
	if !in {
		x.w.Err("ERR index out of range")
		return nil
	}
	x.touch(x.args[1])
	x.w.OK()
	return e.Coll.lset(x.tx, i, x.args[3])
}

func cmdLRem(x *ctx) error {
	count, ok := x.intArg(2)
	if !ok {
		return nil
	}
	if e, wrong, err := x.typed(x.args[1], tList); err != nil || wrong {
		return err
	} else if e != nil && e.Coll != nil {
		return lremInPlace(x, e, count)
	}
	l, e, ok, err := x.list(x.args[1])
	if err != nil || !ok {
		return err
	}
	v := string(x.args[3])
	removed := int64(0)
	out := make([][]byte, 0, len(l))
	if count >= 0 {
		for _, it := range l {
			if string(it) == v && (count == 0 || removed < count) {
				removed++
				continue
			}
			out = append(out, it)
		}
	} else {
		for i := len(l) - 1; i >= 0; i-- {
			if string(l[i]) == v && removed < -count {
				removed++
				continue
			}
			out = append(out, l[i])
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	x.w.Int(removed)
	if removed == 0 {
		return nil
	}
	return x.store(x.args[1], tList, e, out, len(out) == 0)
}

func cmdLTrim(x *ctx) error {
	start, ok1 := parseInt(x.args[2])
	stop, ok2 := parseInt(x.args[3])
	if !ok1 || !ok2 {
		x.w.Err(errNotInt)
		return nil
	}
	e, wrong, err := x.typed(x.args[1], tList)
	if err != nil || wrong {
		return err
	}
	x.w.OK()
	if e == nil {
		return nil
	}
	n := e.Coll.Len
	lo, hi := span(start, stop, n)
	if lo > hi || lo >= n {
		lo, hi = n, n-1
	}
	// Pop what lies outside [lo, hi] from both ends: O(removed).
	if _, err := x.popList(x.args[1], e, n-1-hi, false); err != nil || hi < 0 {
		return err
	}
	_, err = x.popList(x.args[1], e, lo, true)
	return err
}

func cmdLInsert(x *ctx) error {
	before := eq(x.args[2], "before")
	if !before && !eq(x.args[2], "after") {
		x.w.Err(errSyntax)
		return nil
	}
	if e, wrong, err := x.typed(x.args[1], tList); err != nil || wrong {
		return err
	} else if e != nil && e.Coll != nil {
		return linsertInPlace(x, e, before)
	}
	l, e, ok, err := x.list(x.args[1])
	if err != nil || !ok {
		return err
	}
	if e == nil {
		x.w.Int(0)
		return nil
	}
	for i, it := range l {
		if string(it) == string(x.args[3]) {
			if !before {
				i++
			}
			l = append(l[:i], append([][]byte{x.args[4]}, l[i:]...)...)
			x.w.Int(int64(len(l)))
			return x.store(x.args[1], tList, e, l, false)
		}
	}
	x.w.Int(-1)
	return nil
}

// moveOne pops from src (left or right) and pushes to dst; nil if empty.
func moveOne(x *ctx, src, dst []byte, fromLeft, toLeft bool) ([]byte, bool, error) {
	e, wrong, err := x.typed(src, tList)
	if err != nil || wrong || e == nil {
		return nil, !wrong, err
	}
	if _, wrong, err := x.typed(dst, tList); err != nil || wrong {
		return nil, false, err
	}
	if bytes.Equal(src, dst) && e.Coll.Len == 1 {
		// Moving a one-element list's element onto itself changes nothing.
		// Redis pushes before it deletes an emptied source, so the key and
		// its TTL stay; popping first would delete the key and drop the TTL.
		x.touch(src)
		return append([]byte(nil), e.Coll.lget(0)...), true, nil
	}
	got, err := x.popList(src, e, 1, fromLeft)
	if err != nil {
		return nil, false, err
	}
	de, _, err := x.typed(dst, tList)
	if err != nil {
		return nil, false, err
	}
	_, err = x.pushList(dst, de, got, toLeft)
	return got[0], true, err
}

func sides(x *ctx, i int) (bool, bool, bool) {
	if x.name == "rpoplpush" || x.name == "brpoplpush" {
		return false, true, true
	}
	from, to := strings.ToLower(string(x.args[i])), strings.ToLower(string(x.args[i+1]))
	if (from != "left" && from != "right") || (to != "left" && to != "right") {
		x.w.Err(errSyntax)
		return false, false, false
	}
	return from == "left", to == "left", true
}

func cmdLMove(x *ctx) error {
	fl, tl, ok := sides(x, 3)
	if !ok {
		return nil
	}
	v, ok, err := moveOne(x, x.args[1], x.args[2], fl, tl)
	if err != nil || !ok {
		return err
	}
	if v == nil {
		x.w.Null()
	} else {
		x.w.Bulk(v)
	}
	return nil
}

func timeoutArg(x *ctx, i int) (float64, bool) {
	t, ok := parseFloat(x.args[i])
	if !ok || math.IsInf(t, 0) {
		x.w.Err("ERR timeout is not a float or out of range")
		return 0, false
	}
	if t < 0 {
		x.w.Err("ERR timeout is negative")
		return 0, false
	}
	return t, true
}

func bpop(x *ctx, left bool) error {
	t, ok := timeoutArg(x, len(x.args)-1)
	if !ok {
		return nil
	}
	keys := x.args[1 : len(x.args)-1]
	for _, k := range keys {
		e, wrong, err := x.typed(k, tList)
		if err != nil || wrong {
			return err
		}
		if e == nil {
			continue
		}
		got, err := x.popList(k, e, 1, left)
		if err != nil {
			return err
		}
		x.w.Array(2)
		x.w.Bulk(k)
		x.w.Bulk(got[0])
		return nil
	}
	if x.c.multiInExec() {
		x.w.NullArray()
		return nil
	}
	x.block(keys, t)
	return nil
}

func cmdBLMove(x *ctx) error {
	ti, fl, tl, ok := 5, false, true, true
	if x.name == "brpoplpush" {
		ti = 3
	} else if fl, tl, ok = sides(x, 3); !ok {
		return nil
	}
	t, ok := timeoutArg(x, ti)
	if !ok {
		return nil
	}
	v, ok, err := moveOne(x, x.args[1], x.args[2], fl, tl)
	if err != nil || !ok {
		return err
	}
	if v != nil {
		x.w.Bulk(v)
		return nil
	}
	if x.c.multiInExec() {
		x.w.Null()
		return nil
	}
	x.block(x.args[1:2], t)
	return nil
}

// ---- sets (intset-like compact values, then a table: phash.go)

// set reads a whole set into Go values (for the set algebra).
func (x *ctx) set(k []byte) (*hashv, *pEntry, bool, error) {
	return typedValue(x, k, tSet, newHash, loadSet)
}

func sread(x *ctx, fn func(s *hobj)) error {
	s, ok, err := x.hashObj(x.args[1], tSet)
	if err == nil && ok {
		fn(s)
	}
	return err
}

func replySet(x *ctx, keys []string) {
	x.w.Set(len(keys))
	for _, k := range keys {
		x.w.BulkS(k)
	}
}

func cmdSAdd(x *ctx) error {
	s, ok, err := x.hashObj(x.args[1], tSet)
	if err != nil || !ok {
		return err
	}
	n := int64(0)
	for _, m := range x.args[2:] {
		if s.has(m) {
			continue
		}
		if _, err := s.set(m, nil); err != nil {
			return err
		}
		n++
	}
	x.w.Int(n)
	return s.done()
}

func cmdSRem(x *ctx) error {
	s, ok, err := x.hashObj(x.args[1], tSet)
	if err != nil || !ok {
		return err
	}
	n := int64(0)
	for _, m := range x.args[2:] {
		gone, err := s.del(m)
		if err != nil {
			return err
		}
		n += b2i(gone)
	}
	x.w.Int(n)
	return s.done()
}

func cmdSPop(x *ctx) error {
	count := int64(1)
	if len(x.args) == 3 {
		n, ok := parseInt(x.args[2])
		if !ok || n < 0 {
			x.w.Err("ERR value is out of range, must be positive")
			return nil
		}
		count = n
	} else if len(x.args) > 3 {
		x.w.Err(errSyntax)
		return nil
	}
	s, ok, err := x.hashObj(x.args[1], tSet)
	if err != nil || !ok {
		return err
	}
	picks := randomPicks(s.keys(), count)
	for _, p := range picks {
		if _, err := s.del([]byte(p)); err != nil {
			return err
		}
	}
	if len(x.args) == 3 {
		replySet(x, picks)
	} else if len(picks) == 0 {
		x.w.Null()
	} else {
		x.w.BulkS(picks[0])
	}
	return s.done()
}

func cmdSRandMember(x *ctx) error {
	return sread(x, func(s *hobj) {
		if len(x.args) == 2 {
			if s.n() == 0 {
				x.w.Null()
			} else {
				x.w.BulkS(s.keys()[rand.IntN(s.n())])
			}
			return
		}
		n, ok := x.intArg(2)
		if !ok {
			return
		}
		if n < -math.MaxInt64/2 {
			x.w.Err("ERR value is out of range")
			return
		}
		picks := randomPicks(s.keys(), n)
		x.w.Array(len(picks))
		for _, p := range picks {
			x.w.BulkS(p)
		}
	})
}

func cmdSMove(x *ctx) error {
	if e, err := x.lookup(x.args[1]); err != nil || e == nil {
		if err == nil {
			x.w.Int(0)
		}
		return err
	}
	src, ok, err := x.hashObj(x.args[1], tSet)
	if err != nil || !ok {
		return err
	}
	dst, ok, err := x.hashObj(x.args[2], tSet)
	if err != nil || !ok {
		return err
	}
	m := x.args[3]
	if !src.has(m) {
		x.w.Int(0)
		return nil
	}
	x.w.Int(1)
	if string(x.args[1]) == string(x.args[2]) {
		return nil
	}
	if _, err := src.del(m); err != nil {
		return err
	}
	if err := src.done(); err != nil {
		return err
	}
	if dst.has(m) {
		return nil
	}
	if _, err := dst.set(m, nil); err != nil {
		return err
	}
	return dst.done()
}

func (x *ctx) combine(keys [][]byte, op byte) (*hashv, bool, error) {
	var out *hashv
	for i, k := range keys {
		s, _, ok, err := x.set(k)
		if err != nil || !ok {
			return nil, false, err
		}
		switch {
		case i == 0:
			out = s
		case op == 'u':
			for _, m := range s.keys {
				out.set(m, nil)
			}
		case op == 'd':
			for _, m := range s.keys {
				out.del(m)
			}
		case op == 'i':
			for _, m := range append([]string(nil), out.keys...) {
				if !s.has(m) {
					out.del(m)
				}
			}
		}
	}
	return out, true, nil
}

func setop(x *ctx, op byte, store bool) error {
	keys := x.args[1:]
	if store {
		keys = x.args[2:]
	}
	out, ok, err := x.combine(keys, op)
	if err != nil || !ok {
		return err
	}
	if !store {
		replySet(x, out.keys)
		return nil
	}
	x.w.Int(int64(out.n()))
	if out.n() == 0 {
		_, err := x.del(x.args[1])
		return err
	}
	return x.putValue(x.args[1], tSet, out)
}

func cmdSInterCard(x *ctx) error {
	n, ok := parseInt(x.args[1])
	if !ok || n <= 0 {
		x.w.Err("ERR numkeys should be greater than 0")
		return nil
	}
	if int64(len(x.args)-2) < n {
		x.w.Err("ERR Number of keys can't be greater than number of args")
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
	out, ok, err := x.combine(x.args[2:2+n], 'i')
	if err != nil || !ok {
		return err
	}
	c := int64(out.n())
	if limit > 0 {
		c = min(c, limit)
	}
	x.w.Int(c)
	return nil
}

// collScan answers SSCAN/HSCAN/ZSCAN. A compact value is answered whole
// with cursor 0 (as Redis does for listpacks and intsets); a table is
// walked COUNT buckets from the cursor, with SCAN's reverse-binary cursor
// (dictScan), so a table of a million fields is never sent in one reply.
func collScan(x *ctx, t int64) error {
	cur, err := strconv.ParseUint(string(x.args[2]), 10, 64)
	if err != nil {
		x.w.Err("ERR invalid cursor")
		return nil
	}
	match, count, _, ok := scanOpts(x, 3)
	if !ok {
		return nil
	}
	e, wrong, err := x.typed(x.args[1], t)
	if err != nil || wrong {
		return err
	}
	var items []string
	keep := func(k []byte) bool { return match == nil || globMatch(match, k, false) }
	switch {
	case e == nil:
		cur = 0
	case e.Coll != nil && e.Coll.Dict != nil:
		cur = dictScan(e.Coll.Dict, cur, count, func(f *pEntry) {
			if !keep(f.key()) {
				return
			}
			items = append(items, string(f.key()))
			if t == tHash {
				items = append(items, string(f.val()))
			}
		})
	case e.Coll != nil && e.Coll.ZDict != nil:
		cur = e.Coll.ZDict.scan(cur, count, func(n *pZNode) {
			if keep(n.member()) {
				items = append(items, string(n.member()), fmtFloat(n.Score))
			}
		})
	default:
		cur, items = 0, compactScan(e, t, keep)
	}
	x.w.Array(2)
	x.w.BulkS(strconv.FormatUint(cur, 10))
	x.w.Array(len(items))
	for _, it := range items {
		x.w.BulkS(it)
	}
	return nil
}

// compactScan lists a compact value's members (and values or scores)
// that keep accepts.
func compactScan(e *pEntry, t int64, keep func([]byte) bool) []string {
	var items []string
	switch t {
	case tSet:
		for _, k := range loadSet(e).keys {
			if keep([]byte(k)) {
				items = append(items, k)
			}
		}
	case tHash:
		h := loadHash(e)
		for _, k := range h.keys {
			if keep([]byte(k)) {
				items = append(items, k, string(h.vals[k]))
			}
		}
	case tZSet:
		for _, el := range loadZSet(e).els {
			if keep([]byte(el.member)) {
				items = append(items, el.member, fmtFloat(el.score))
			}
		}
	}
	return items
}
