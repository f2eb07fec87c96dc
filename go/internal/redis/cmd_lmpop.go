// cmd_lmpop.go: LMPOP and BLMPOP (pop up to COUNT elements from the first
// non-empty of several lists; the blocking form parks like BLPOP).
//
// Crash behaviour: the pop is part of the command's region.
package redis

func init() {
	reg("lmpop", -4, "w", k0, func(x *ctx) error { return lmpop(x, 1, false) })
	reg("blmpop", -5, "w", k0, func(x *ctx) error { return lmpop(x, 2, true) })
}

// mpopArgs are the parsed arguments of [B]LMPOP / [B]ZMPOP.
type mpopArgs struct {
	timeout float64
	keys    [][]byte
	first   bool // LEFT / MIN
	count   int64
}

// parseMPop reads [timeout] numkeys key... A|B [COUNT n] with numkeys at
// args[first]; a and b name the two ends (left/right, min/max).
func parseMPop(x *ctx, first int, blocking bool, a, b string) (m mpopArgs, ok bool) {
	if blocking {
		if m.timeout, ok = timeoutArg(x, 1); !ok {
			return m, false
		}
	}
	n, ok := parseInt(x.args[first])
	if !ok || n <= 0 {
		x.w.Err("ERR numkeys should be greater than 0")
		return m, false
	}
	if int64(len(x.args)-first-1) < n+1 {
		x.w.Err(errSyntax)
		return m, false
	}
	m.keys = x.args[first+1 : first+1+int(n)]
	rest := x.args[first+1+int(n):]
	m.first, m.count = eq(rest[0], a), 1
	if !m.first && !eq(rest[0], b) {
		x.w.Err(errSyntax)
		return m, false
	}
	switch {
	case len(rest) == 3 && eq(rest[1], "count"):
		c, ok := parseInt(rest[2])
		if !ok || c <= 0 {
			x.w.Err("ERR count should be greater than 0")
			return m, false
		}
		m.count = c
	case len(rest) != 1:
		x.w.Err(errSyntax)
		return m, false
	}
	return m, true
}

// lmpop: first is the index of numkeys.
func lmpop(x *ctx, first int, blocking bool) error {
	m, ok := parseMPop(x, first, blocking, "left", "right")
	if !ok {
		return nil
	}
	keys, count, left, timeout := m.keys, m.count, m.first, m.timeout
	for _, k := range keys {
		e, wrong, err := x.typed(k, tList)
		if err != nil || wrong {
			return err
		}
		if e == nil {
			continue
		}
		got, err := x.popList(k, e, count, left)
		if err != nil {
			return err
		}
		x.w.Array(2)
		x.w.Bulk(k)
		x.w.Array(len(got))
		for _, v := range got {
			x.w.Bulk(v)
		}
		return nil
	}
	if !blocking || x.c.multiInExec() {
		x.w.NullArray()
		return nil
	}
	x.block(keys, timeout)
	return nil
}
