// cmd_keys.go: generic key commands (DEL, EXISTS, TYPE, EXPIRE family,
// TTL, KEYS, SCAN, RENAME, COPY, MOVE, SWAPDB, ...) and glob matching.
//
// Crash behaviour: part of the batch's region like every command.
package redis

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

func init() {
	reg("del", -2, "w", kAll, cmdDel)
	reg("unlink", -2, "w", kAll, cmdDel)
	reg("exists", -2, "r", kAll, cmdExists)
	reg("touch", -2, "r", kAll, cmdExists)
	reg("type", 2, "r", k1, cmdType)
	reg("expire", -3, "w", k1, func(x *ctx) error { return expireGeneric(x, 1000, false) })
	reg("pexpire", -3, "w", k1, func(x *ctx) error { return expireGeneric(x, 1, false) })
	reg("expireat", -3, "w", k1, func(x *ctx) error { return expireGeneric(x, 1000, true) })
	reg("pexpireat", -3, "w", k1, func(x *ctx) error { return expireGeneric(x, 1, true) })
	reg("ttl", 2, "r", k1, func(x *ctx) error { return ttlGeneric(x, 1000, false) })
	reg("pttl", 2, "r", k1, func(x *ctx) error { return ttlGeneric(x, 1, false) })
	reg("expiretime", 2, "r", k1, func(x *ctx) error { return ttlGeneric(x, 1000, true) })
	reg("pexpiretime", 2, "r", k1, func(x *ctx) error { return ttlGeneric(x, 1, true) })
	reg("persist", 2, "w", k1, cmdPersist)
	reg("keys", 2, "r", k0, cmdKeys)
	reg("scan", -2, "r", k0, cmdScan)
	reg("rename", 3, "w", [3]int{1, 2, 1}, func(x *ctx) error { return renameGeneric(x, false) })
	reg("renamenx", 3, "w", [3]int{1, 2, 1}, func(x *ctx) error { return renameGeneric(x, true) })
	reg("randomkey", 1, "r", k0, cmdRandomKey)
	reg("copy", -3, "w", [3]int{1, 2, 1}, cmdCopy)
	reg("move", 3, "w", k1, cmdMove)
	reg("swapdb", 3, "w", k0, cmdSwapDB)
	reg("object", -2, "r", k0, cmdObject)
}

func cmdDel(x *ctx) error {
	n := int64(0)
	for _, k := range x.args[1:] {
		ok, err := x.del(k)
		if err != nil {
			return err
		}
		n += b2i(ok)
	}
	x.w.Int(n)
	return nil
}

func cmdExists(x *ctx) error {
	n := int64(0)
	for _, k := range x.args[1:] {
		e, err := x.lookup(k)
		if err != nil {
			return err
		}
		n += b2i(e != nil)
	}
	x.w.Int(n)
	return nil
}

func cmdType(x *ctx) error {
	e, err := x.lookup(x.args[1])
	if err != nil {
		return err
	}
	if e == nil {
		x.w.Simple("none")
	} else {
		x.w.Simple(typeNames[e.Type])
	}
	return nil
}

func expireGeneric(x *ctx, unit int64, abs bool) error {
	n, ok := x.intArg(2)
	if !ok {
		return nil
	}
	var nx, xx, gt, lt bool
	for _, a := range x.args[3:] {
		switch strings.ToLower(string(a)) {
		case "nx":
			nx = true
		case "xx":
			xx = true
		case "gt":
			gt = true
		case "lt":
			lt = true
		default:
			x.w.Err("ERR Unsupported option " + string(a))
			return nil
		}
	}
	if nx && (xx || gt || lt) {
		x.w.Err("ERR NX and XX, GT or LT options at the same time are not compatible")
		return nil
	}
	if gt && lt {
		x.w.Err("ERR GT and LT options at the same time are not compatible")
		return nil
	}
	// Redis's checks: seconds must fit in ms, then base + when in int64.
	if unit == 1000 && (n > math.MaxInt64/1000 || n < math.MinInt64/1000) {
		x.w.Err("ERR invalid expire time in '" + x.name + "' command")
		return nil
	}
	at, base := n*unit, int64(0)
	if !abs {
		base = nowMs()
	}
	if at > math.MaxInt64-base {
		x.w.Err("ERR invalid expire time in '" + x.name + "' command")
		return nil
	}
	at += base
	e, err := x.lookup(x.args[1])
	if err != nil {
		return err
	}
	if e == nil {
		x.w.Int(0)
		return nil
	}
	cur := e.Expire
	switch {
	case nx && cur != 0, xx && cur == 0,
		gt && (cur == 0 || at <= cur),
		lt && cur != 0 && at >= cur:
		x.w.Int(0)
		return nil
	}
	x.touch(x.args[1])
	if at <= nowMs() {
		_, err = x.del(x.args[1])
	} else {
		err = setExpire(x.tx, e, at)
	}
	if err == nil {
		x.w.Int(1)
	}
	return err
}

func ttlGeneric(x *ctx, unit int64, abs bool) error {
	e, err := x.lookup(x.args[1])
	if err != nil {
		return err
	}
	switch {
	case e == nil:
		x.w.Int(-2)
	case e.Expire == 0:
		x.w.Int(-1)
	case abs:
		x.w.Int(e.Expire / unit)
	default:
		ms := max(e.Expire-nowMs(), 0)
		x.w.Int((ms + unit/2) / unit)
	}
	return nil
}

func cmdPersist(x *ctx) error {
	e, err := x.lookup(x.args[1])
	if err != nil {
		return err
	}
	if e == nil || e.Expire == 0 {
		x.w.Int(0)
		return nil
	}
	x.touch(x.args[1])
	x.w.Int(1)
	return setExpire(x.tx, e, 0)
}

func (x *ctx) liveKeys(match []byte, typ int64) [][]byte {
	var out [][]byte
	now := nowMs()
	x.dict().each(func(e *pEntry) bool {
		if (e.Expire == 0 || e.Expire > now) && (match == nil || globMatch(match, e.key(), false)) && (typ == -1 || e.Type == typ) {
			out = append(out, append([]byte(nil), e.key()...))
		}
		return true
	})
	return out
}

func cmdKeys(x *ctx) error {
	keys := x.liveKeys(x.args[1], -1)
	x.w.Array(len(keys))
	for _, k := range keys {
		x.w.Bulk(k)
	}
	return nil
}

func cmdScan(x *ctx) error {
	cur, err := strconv.ParseUint(string(x.args[1]), 10, 64)
	if err != nil {
		x.w.Err("ERR invalid cursor")
		return nil
	}
	match, count, typ, ok := scanOpts(x, 2)
	if !ok {
		return nil
	}
	var keys [][]byte
	now := nowMs()
	cur = dictScan(x.dict(), cur, count, func(e *pEntry) {
		if (e.Expire == 0 || e.Expire > now) && (match == nil || globMatch(match, e.key(), false)) && (typ == -1 || e.Type == typ) {
			keys = append(keys, append([]byte(nil), e.key()...))
		}
	})
	x.w.Array(2)
	x.w.BulkS(strconv.FormatUint(cur, 10))
	x.w.Array(len(keys))
	for _, k := range keys {
		x.w.Bulk(k)
	}
	return nil
}

// dictScan visits buckets of d from cursor until it has seen count
// entries (before MATCH/TYPE filtering) or visited 10*count buckets, as
// Redis's SCAN does, and returns the next cursor, 0 at the end.
func dictScan(d *pDict, cur uint64, count int64, fn func(e *pEntry)) uint64 {
	seen := int64(0)
	visit := func(e *pEntry) { seen++; fn(e) }
	for i := int64(0); i < 10*count && seen < count; i++ {
		if cur = d.scanBucket(cur, visit); cur == 0 {
			break
		}
	}
	return cur
}

func scanOpts(x *ctx, from int) (match []byte, count int64, typ int64, ok bool) {
	count, typ = 10, -1
	for i := from; i < len(x.args); i += 2 {
		if i+1 >= len(x.args) {
			x.w.Err(errSyntax)
			return nil, 0, 0, false
		}
		switch strings.ToLower(string(x.args[i])) {
		case "match":
			match = x.args[i+1]
		case "count":
			n, good := parseInt(x.args[i+1])
			if !good {
				x.w.Err(errNotInt)
				return nil, 0, 0, false
			}
			if n < 1 {
				x.w.Err(errSyntax)
				return nil, 0, 0, false
			}
			count = n
		case "type":
			typ = -2
			for t, n := range typeNames {
				if eq(x.args[i+1], n) {
					typ = int64(t)
				}
			}
		default:
			x.w.Err(errSyntax)
			return nil, 0, 0, false
		}
	}
	return match, count, typ, true
}

func renameGeneric(x *ctx, nx bool) error {
	src, dst := x.args[1], x.args[2]
	e, err := x.lookup(src)
	if err != nil {
		return err
	}
	if e == nil {
		x.w.Err(errNoKey)
		return nil
	}
	if string(src) == string(dst) {
		if nx {
			x.w.Int(0)
		} else {
			x.w.OK()
		}
		return nil
	}
	if nx {
		d, err := x.lookup(dst)
		if err != nil {
			return err
		}
		if d != nil {
			x.w.Int(0)
			return nil
		}
	}
	typ, val, exp, coll := e.Type, append([]byte(nil), e.val()...), e.Expire, e.Coll
	if coll != nil { // the structure moves to the new key as it is
		if err := x.tx.Log(&e.Coll); err != nil {
			return err
		}
		e.Coll = nil
	}
	if _, err := x.del(src); err != nil {
		return err
	}
	ne, err := x.put(dst, typ, val, false)
	if err != nil {
		return err
	}
	if coll != nil {
		if err := x.tx.Log(&ne.Coll); err != nil {
			return err
		}
		ne.Coll = coll
	}
	if typ == tList || typ == tZSet {
		x.markReady(dst)
	}
	if nx {
		x.w.Int(1)
	} else {
		x.w.OK()
	}
	return setExpire(x.tx, ne, exp)
}

func cmdRandomKey(x *ctx) error {
	keys := x.liveKeys(nil, -1)
	if len(keys) == 0 {
		x.w.Null()
	} else {
		x.w.Bulk(keys[rand.IntN(len(keys))])
	}
	return nil
}

func cmdCopy(x *ctx) error {
	db, replace := x.c.db, false
	for i := 3; i < len(x.args); i++ {
		switch {
		case eq(x.args[i], "replace"):
			replace = true
		case eq(x.args[i], "db") && i+1 < len(x.args):
			n, ok := parseInt(x.args[i+1])
			if !ok {
				x.w.Err(errNotInt)
				return nil
			}
			if n < 0 || n >= numDBs {
				x.w.Err("ERR DB index is out of range")
				return nil
			}
			db = int(n)
			i++
		default:
			x.w.Err(errSyntax)
			return nil
		}
	}
	return copyKey(x, x.args[1], x.args[2], db, replace, false)
}

// copyKey copies (or moves) src of the client's db to dst in db.
func copyKey(x *ctx, src, dst []byte, db int, replace, move bool) error {
	if db == x.c.db && string(src) == string(dst) {
		x.w.Err("ERR source and destination objects are the same")
		return nil
	}
	e, err := x.lookup(src)
	if err != nil {
		return err
	}
	if e == nil {
		x.w.Int(0)
		return nil
	}
	d, err := x.s.lookupDB(x.tx, db, dst)
	if err != nil {
		return err
	}
	if d != nil && !replace {
		x.w.Int(0)
		return nil
	}
	ne, err := x.s.putDB(x.tx, db, dst, e.Type, nil, false)
	if err != nil {
		return err
	}
	if err := writeValueAs(x.tx, &x.s.lim, ne, e.Type, loadAny(e), e.Coll != nil); err != nil {
		return err
	}
	if err := setExpire(x.tx, ne, e.Expire); err != nil {
		return err
	}
	if move {
		if _, err := x.del(src); err != nil {
			return err
		}
	}
	x.w.Int(1)
	return nil
}

func cmdMove(x *ctx) error {
	n, ok := x.intArg(2)
	if !ok {
		return nil
	}
	if n != int64(int32(n)) {
		x.w.Err("ERR value is out of range, value must between -2147483648 and 2147483647")
		return nil
	}
	if n < 0 || n >= numDBs {
		x.w.Err("ERR DB index is out of range")
		return nil
	}
	if int(n) == x.c.db {
		x.w.Err("ERR source and destination objects are the same")
		return nil
	}
	return copyKey(x, x.args[1], x.args[1], int(n), false, true)
}

func cmdSwapDB(x *ctx) error {
	a, ok1 := parseInt(x.args[1])
	b, ok2 := parseInt(x.args[2])
	if !ok1 || !ok2 {
		x.w.Err("ERR invalid first DB index")
		return nil
	}
	if a < 0 || a >= numDBs || b < 0 || b >= numDBs {
		x.w.Err("ERR DB index is out of range")
		return nil
	}
	r := x.s.root
	if err := x.tx.Log(&r.DBs); err != nil {
		return err
	}
	r.DBs[a], r.DBs[b] = r.DBs[b], r.DBs[a]
	// Clients blocked on a key of either database see its new contents.
	for _, bs := range x.s.blocked {
		if int64(bs.db) == a || int64(bs.db) == b {
			for _, k := range bs.keys {
				x.s.ready[k] = true
			}
		}
	}
	x.s.watchGen++
	for k := range x.s.watch {
		x.s.watch[k] = x.s.watchGen
	}
	x.w.OK()
	return nil
}

func cmdObject(x *ctx) error {
	sub := strings.ToLower(string(x.args[1]))
	if sub == "help" {
		x.w.Array(1)
		x.w.Simple("OBJECT ENCODING <key>")
		return nil
	}
	if len(x.args) != 3 {
		x.w.Err("ERR wrong number of arguments for 'object|" + sub + "' command")
		return nil
	}
	e, err := x.lookup(x.args[2])
	if err != nil {
		return err
	}
	if e == nil {
		x.w.Null()
		return nil
	}
	switch sub {
	case "encoding":
		x.w.BulkS(encodingOf(e))
	case "refcount":
		x.w.Int(1)
	case "idletime", "freq":
		x.w.Int(0)
	default:
		x.w.Err("ERR unknown subcommand '" + string(x.args[1]) + "'. Try OBJECT HELP.")
	}
	return nil
}

// encodingOf names the value's encoding with Redis 7.0's names: a compact
// value is listpack (intset for sets), a persistent structure quicklist,
// hashtable or skiplist (pcoll.go).
func encodingOf(e *pEntry) string {
	switch e.Type {
	case tString:
		v := e.val()
		if cap(v) > len(v) {
			return "raw" // changed in place (rawstr.go)
		}
		if _, ok := parseInt(v); ok && len(v) <= 20 {
			return "int"
		}
		if len(v) <= 44 {
			return "embstr"
		}
		return "raw"
	}
	return encodingName(e)
}

// globMatch is Redis's stringmatchlen: * ? [...] [^...] and \ escapes.
func globMatch(p, s []byte, nocase bool) bool {
	skip := false
	return globMatchAt(p, s, nocase, &skip, 0)
}

// globMatchAt is globMatch with Redis's two guards against exponential
// patterns ("a*a*a*...b"): once the rest after a '*' failed for every
// suffix, no earlier '*' can match by taking a longer prefix (skip), and
// nesting deeper than 1000 stars fails.
func globMatchAt(p, s []byte, nocase bool, skip *bool, nesting int) bool {
	if nesting > 1000 {
		return false
	}
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatchAt(p[1:], s[i:], nocase, skip, nesting+1) {
					return true
				}
				if *skip {
					return false
				}
			}
			*skip = true
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			match := false
			for len(p) > 0 && p[0] != ']' {
				if p[0] == '\\' && len(p) >= 2 {
					p = p[1:]
					match = match || p[0] == s[0]
				} else if len(p) >= 3 && p[1] == '-' {
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					match = match || (s[0] >= lo && s[0] <= hi)
					p = p[2:]
				} else {
					match = match || lowerIf(p[0], nocase) == lowerIf(s[0], nocase)
				}
				p = p[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
			if len(p) == 0 {
				return len(s) == 0
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || lowerIf(p[0], nocase) != lowerIf(s[0], nocase) {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
	}
	return len(s) == 0
}

func lowerIf(c byte, nocase bool) byte {
	if nocase && c >= 'A' && c <= 'Z' {
		return c + 32
	}
	return c
}
