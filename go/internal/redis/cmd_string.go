// cmd_string.go: string commands (GET, SET and its options, INCR family,
// APPEND, GETRANGE/SETRANGE, MGET/MSET, ...).
//
// Crash behaviour: each command's changes are part of the batch's region;
// a value is written as a new pool array and the old one freed at commit.
package redis

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	engram "github.com/engram-pm/engram-go"
)

func init() {
	reg("get", 2, "r", k1, cmdGet)
	reg("set", -3, "w", k1, cmdSet)
	reg("setnx", 3, "w", k1, func(x *ctx) error { return setGeneric(x, x.args[1], x.args[2], 0, "nx", false, false, true) })
	reg("setex", 4, "w", k1, func(x *ctx) error { return setTTLForm(x, 1000) })
	reg("psetex", 4, "w", k1, func(x *ctx) error { return setTTLForm(x, 1) })
	reg("getset", 3, "w", k1, func(x *ctx) error { return setGeneric(x, x.args[1], x.args[2], 0, "", false, true, false) })
	reg("getdel", 2, "w", k1, cmdGetDel)
	reg("getex", -2, "w", k1, cmdGetEx)
	reg("mget", -2, "r", kAll, cmdMGet)
	reg("mset", -3, "w", [3]int{1, -1, 2}, func(x *ctx) error { return cmdMSet(x, false) })
	reg("msetnx", -3, "w", [3]int{1, -1, 2}, func(x *ctx) error { return cmdMSet(x, true) })
	reg("append", 3, "w", k1, cmdAppend)
	reg("strlen", 2, "r", k1, cmdStrlen)
	reg("getrange", 4, "r", k1, cmdGetRange)
	reg("substr", 4, "r", k1, cmdGetRange)
	reg("setrange", 4, "w", k1, cmdSetRange)
	reg("incr", 2, "w", k1, func(x *ctx) error { return incrBy(x, 1, true) })
	reg("decr", 2, "w", k1, func(x *ctx) error { return incrBy(x, -1, true) })
	reg("incrby", 3, "w", k1, func(x *ctx) error { return incrArg(x, 1) })
	reg("decrby", 3, "w", k1, func(x *ctx) error { return incrArg(x, -1) })
	reg("incrbyfloat", 3, "w", k1, cmdIncrByFloat)
}

// str returns the string at k; ok false if a reply was written (wrong type).
func (x *ctx) str(k []byte) (v []byte, e *pEntry, ok bool, err error) {
	e, wrong, err := x.typed(k, tString)
	if err != nil || wrong {
		return nil, nil, false, err
	}
	if e == nil {
		x.s.stats.keyspaceMiss++
		return nil, nil, true, nil
	}
	x.s.stats.keyspaceHits++
	return e.val(), e, true, nil
}

func cmdGet(x *ctx) error {
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	if e == nil {
		x.w.Null()
	} else {
		x.w.Bulk(v)
	}
	return nil
}

func cmdSet(x *ctx) error {
	var at int64
	cond, keep, get, seenTTL := "", false, false, false
	for i := 3; i < len(x.args); i++ {
		a := strings.ToLower(string(x.args[i]))
		switch {
		case (a == "nx" || a == "xx") && cond == "":
			cond = a
		case a == "get":
			get = true
		case a == "keepttl" && !seenTTL:
			keep = true
		case (a == "ex" || a == "px" || a == "exat" || a == "pxat") && !keep && !seenTTL && i+1 < len(x.args):
			n, ok := parseInt(x.args[i+1])
			if !ok {
				x.w.Err(errNotInt)
				return nil
			}
			if n <= 0 || (a == "ex" || a == "exat") && n > math.MaxInt64/1000 {
				x.w.Err("ERR invalid expire time in 'set' command")
				return nil
			}
			switch a {
			case "ex":
				at = nowMs() + n*1000
			case "px":
				at = nowMs() + n
			case "exat":
				at = n * 1000
			case "pxat":
				at = n
			}
			seenTTL = true
			i++
		default:
			x.w.Err(errSyntax)
			return nil
		}
	}
	return setGeneric(x, x.args[1], x.args[2], at, cond, keep, get, false)
}

// setGeneric: at is the absolute expiry (0 none); cond "nx"/"xx";
// intReply for SETNX.
func setGeneric(x *ctx, k, v []byte, at int64, cond string, keep, get, intReply bool) error {
	e, err := x.lookup(k)
	if err != nil {
		return err
	}
	if get && e != nil && e.Type != tString {
		x.w.Err(errWrongType)
		return nil
	}
	var old []byte
	if get && e != nil {
		old = append([]byte(nil), e.val()...)
	}
	skip := (cond == "nx" && e != nil) || (cond == "xx" && e == nil)
	if !skip {
		ne, err := x.putLooked(k, e, tString, v, keep)
		if err != nil {
			return err
		}
		if at != 0 {
			if at <= nowMs() {
				if _, err := x.del(k); err != nil {
					return err
				}
			} else if err := setExpire(x.tx, ne, at); err != nil {
				return err
			}
		}
	}
	switch {
	case intReply:
		x.w.Int(b2i(!skip))
	case get:
		if e == nil {
			x.w.Null()
		} else {
			x.w.Bulk(old)
		}
	case skip:
		x.w.Null()
	default:
		x.w.OK()
	}
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func setTTLForm(x *ctx, unit int64) error {
	n, ok := x.intArg(2)
	if !ok {
		return nil
	}
	if n <= 0 || n > math.MaxInt64/1000 {
		x.w.Err("ERR invalid expire time in '" + x.name + "' command")
		return nil
	}
	return setGeneric(x, x.args[1], x.args[3], nowMs()+n*unit, "", false, false, false)
}

func cmdGetDel(x *ctx) error {
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	if e == nil {
		x.w.Null()
		return nil
	}
	x.w.Bulk(v)
	_, err = x.del(x.args[1])
	return err
}

func cmdGetEx(x *ctx) error {
	at, persist := int64(-1), false
	for i := 2; i < len(x.args); i++ {
		a := strings.ToLower(string(x.args[i]))
		switch {
		case a == "persist" && at < 0 && !persist:
			persist = true
		case (a == "ex" || a == "px" || a == "exat" || a == "pxat") && at < 0 && !persist && i+1 < len(x.args):
			n, ok := parseInt(x.args[i+1])
			if !ok {
				x.w.Err(errNotInt)
				return nil
			}
			if n <= 0 || (a == "ex" || a == "exat") && n > math.MaxInt64/1000 {
				x.w.Err("ERR invalid expire time in 'getex' command")
				return nil
			}
			at = map[string]int64{"ex": nowMs() + n*1000, "px": nowMs() + n, "exat": n * 1000, "pxat": n}[a]
			i++
		default:
			x.w.Err(errSyntax)
			return nil
		}
	}
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	if e == nil {
		x.w.Null()
		return nil
	}
	x.w.Bulk(v)
	switch {
	case persist:
		x.touch(x.args[1])
		return setExpire(x.tx, e, 0)
	case at > 0 && at <= nowMs():
		_, err := x.del(x.args[1])
		return err
	case at > 0:
		x.touch(x.args[1])
		return setExpire(x.tx, e, at)
	}
	return nil
}

func cmdMGet(x *ctx) error {
	x.w.Array(len(x.args) - 1)
	for _, k := range x.args[1:] {
		e, err := x.lookup(k)
		if err != nil {
			return err
		}
		if e == nil || e.Type != tString {
			x.w.Null()
		} else {
			x.w.Bulk(e.val())
		}
	}
	return nil
}

func cmdMSet(x *ctx, nx bool) error {
	if len(x.args)%2 != 1 {
		x.w.Err("ERR wrong number of arguments for '" + x.name + "' command")
		return nil
	}
	if nx {
		for i := 1; i < len(x.args); i += 2 {
			e, err := x.lookup(x.args[i])
			if err != nil {
				return err
			}
			if e != nil {
				x.w.Int(0)
				return nil
			}
		}
	}
	if err := msetPairs(x); err != nil {
		return err
	}
	if nx {
		x.w.Int(1)
	} else {
		x.w.OK()
	}
	return nil
}

// How msetPairs stores an existing key's pair (over[i]).
const (
	msetPut       = iota // putLooked: a new array, or a collection replaced
	msetOverwrite        // over the old value's bytes (canOverwrite)
	msetKept             // the key holds the value already (storesNothing)
)

// msetPairs stores MSET's pairs. Existing keys whose value bytes can
// take the new value (canOverwrite) are logged with one engine call and
// one fence for the whole command and overwritten; keys that hold their
// new value already (storesNothing) are only touched; absent keys are
// linked with one more (pDict.addMany); the others are put one by one. A
// key given twice gets its last value.
func msetPairs(x *ctx) error {
	var b engram.LogBatch
	// Per argument (the keys' places used): on the stack for up to 16 pairs.
	var foundBuf [33]*pEntry
	var overBuf [33]uint8
	found, over := foundBuf[:0], overBuf[:0]
	if len(x.args) > len(foundBuf) {
		found, over = make([]*pEntry, 0, len(x.args)), make([]uint8, 0, len(x.args))
	}
	found, over = found[:len(x.args)], over[:len(x.args)]
	var newKeys, newVals [][]byte
	skip := repeatedKeys(x.args)
	for i := 1; i < len(x.args); i += 2 {
		if skip[i] {
			continue
		}
		e, err := x.lookup(x.args[i])
		if err != nil {
			return err
		}
		switch {
		case e == nil:
			newKeys, newVals = append(newKeys, x.args[i]), append(newVals, x.args[i+1])
		case storesNothing(e, tString, x.args[i+1], true):
			over[i] = msetKept
		case canOverwrite(e, x.args[i+1]):
			logOverwrite(x.tx, &b, e, tString, x.args[i+1], true)
			over[i] = msetOverwrite
		}
		found[i] = e
	}
	if err := x.tx.LogBatch(&b); err != nil {
		return err
	}
	for i := 1; i < len(x.args); i += 2 {
		switch e := found[i]; {
		case skip[i] || e == nil:
		case over[i] == msetKept:
			x.touch(x.args[i])
		case over[i] == msetOverwrite:
			x.touch(x.args[i])
			overwriteVal(e, tString, x.args[i+1])
			if e.Expire != 0 {
				e.Expire = 0 // logged with the entry (logOverwrite)
			}
		default:
			if _, err := x.putLooked(x.args[i], e, tString, x.args[i+1], false); err != nil {
				return err
			}
		}
	}
	for _, k := range newKeys {
		x.touch(k)
	}
	if len(newKeys) == 0 {
		return nil
	}
	return x.dict().addMany(x.tx, newKeys, newVals)
}

// repeatedKeys marks the MSET keys (args[1], args[3], ...) given again
// later in args (nil if none is): compared pairwise for a few keys, with
// a map for many.
func repeatedKeys(args [][]byte) map[int]bool {
	var skip map[int]bool
	mark := func(i int) {
		if skip == nil {
			skip = map[int]bool{}
		}
		skip[i] = true
	}
	if len(args) <= 33 {
		for i := 1; i < len(args); i += 2 {
			for j := i + 2; j < len(args); j += 2 {
				if bytes.Equal(args[i], args[j]) {
					mark(i)
					break
				}
			}
		}
		return skip
	}
	last := make(map[string]int, len(args)/2)
	for i := 1; i < len(args); i += 2 {
		if j, ok := last[string(args[i])]; ok {
			mark(j)
		}
		last[string(args[i])] = i
	}
	return skip
}

func cmdAppend(x *ctx) error {
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	add := x.args[2]
	n := len(v) + len(add)
	if n > maxBulk {
		x.w.Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
		return nil
	}
	if err := x.rawWrite(x.args[1], e, n, len(v), add); err != nil {
		return err
	}
	x.w.Int(int64(n))
	return nil
}

func cmdStrlen(x *ctx) error {
	v, _, ok, err := x.str(x.args[1])
	if err == nil && ok {
		x.w.Int(int64(len(v)))
	}
	return err
}

func cmdGetRange(x *ctx) error {
	start, ok1 := parseInt(x.args[2])
	end, ok2 := parseInt(x.args[3])
	if !ok1 || !ok2 {
		x.w.Err(errNotInt)
		return nil
	}
	v, _, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		x.w.BulkS("")
		return nil
	}
	if start < 0 {
		start = max(n+start, 0)
	}
	if end < 0 {
		end = max(n+end, 0)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		x.w.BulkS("")
		return nil
	}
	x.w.Bulk(v[start : end+1])
	return nil
}

func cmdSetRange(x *ctx) error {
	off, ok := parseInt(x.args[2])
	if !ok {
		x.w.Err(errNotInt)
		return nil
	}
	if off < 0 {
		x.w.Err("ERR offset is out of range")
		return nil
	}
	val := x.args[3]
	if off+int64(len(val)) > maxBulk {
		x.w.Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
		return nil
	}
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	if len(val) == 0 {
		x.w.Int(int64(len(v)))
		return nil
	}
	n := max(len(v), int(off)+len(val))
	if err := x.rawWrite(x.args[1], e, n, int(off), val); err != nil {
		return err
	}
	x.w.Int(int64(n))
	return nil
}

func incrArg(x *ctx, sign int64) error {
	n, ok := x.intArg(2)
	if !ok {
		return nil
	}
	if sign < 0 {
		if n == math.MinInt64 {
			x.w.Err("ERR decrement would overflow")
			return nil
		}
		n = -n
	}
	return incrBy(x, n, true)
}

func incrBy(x *ctx, by int64, _ bool) error {
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	var cur int64
	if e != nil {
		if cur, ok = parseInt(v); !ok {
			x.w.Err(errNotInt)
			return nil
		}
	}
	if (by > 0 && cur > math.MaxInt64-by) || (by < 0 && cur < math.MinInt64-by) {
		x.w.Err(errOverflow)
		return nil
	}
	cur += by
	var buf [20]byte // the new value is copied into the pool: no heap allocation
	nv := strconv.AppendInt(buf[:0], cur, 10)
	if e == nil { // absent: x.str just looked it up, no second walk
		_, err = x.putLooked(x.args[1], nil, tString, nv, false)
	} else {
		x.touch(x.args[1])
		err = setVal(x.tx, e, tString, nv)
	}
	if err == nil {
		x.w.IntDigits(nv)
	}
	return err
}

func cmdIncrByFloat(x *ctx) error {
	by, ok := parseFloat(x.args[2])
	if !ok {
		x.w.Err(errNotFloat)
		return nil
	}
	v, e, ok, err := x.str(x.args[1])
	if err != nil || !ok {
		return err
	}
	var cur float64
	if e != nil {
		if cur, ok = parseFloat(v); !ok {
			x.w.Err(errNotFloat)
			return nil
		}
	}
	cur += by
	if math.IsInf(cur, 0) || math.IsNaN(cur) {
		x.w.Err("ERR increment would produce NaN or Infinity")
		return nil
	}
	nv := []byte(strconv.FormatFloat(cur, 'f', -1, 64))
	if e == nil {
		_, err = x.put(x.args[1], tString, nv, false)
	} else {
		x.touch(x.args[1])
		err = setVal(x.tx, e, tString, nv)
	}
	if err == nil {
		x.w.Bulk(nv)
	}
	return err
}
