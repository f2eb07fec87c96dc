// cmd_lmpop.go: LMPOP and BLMPOP (pop up to COUNT elements from the first
// non-empty of several lists; the blocking form parks like BLPOP).
//
// Crash behaviour: the pop is part of the command's region.
package redis

func init() {
	reg("lmpop", -4, "w", k0, func(x *ctx) error { return lmpop(x, 1, false) })
	reg("blmpop", -5, "w", k0, func(x *ctx) error { return lmpop(x, 2, true) })
}

// lmpop: first is the index of numkeys.
func lmpop(x *ctx, first int, blocking bool) error {
	var timeout float64
	if blocking {
		t, ok := timeoutArg(x, 1)
		if !ok {
			return nil
		}
		timeout = t
	}
	n, ok := parseInt(x.args[first])
	if !ok || n <= 0 {
		x.w.Err("ERR numkeys should be greater than 0")
		return nil
	}
	if int64(len(x.args)-first-1) < n+1 {
		x.w.Err(errSyntax)
		return nil
	}
	keys := x.args[first+1 : first+1+int(n)]
	rest := x.args[first+1+int(n):]
	left := eq(rest[0], "left")
	if !left && !eq(rest[0], "right") {
		x.w.Err(errSyntax)
		return nil
	}
	count := int64(1)
	switch {
	case len(rest) == 3 && eq(rest[1], "count"):
		c, ok := parseInt(rest[2])
		if !ok || c <= 0 {
			x.w.Err("ERR count should be greater than 0")
			return nil
		}
		count = c
	case len(rest) != 1:
		x.w.Err(errSyntax)
		return nil
	}
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
