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
		l, e, ok, err := x.list(k)
		if err != nil || !ok {
			return err
		}
		if e == nil {
			continue
		}
		m := min(int(count), len(l))
		var got [][]byte
		if left {
			got, l = l[:m], l[m:]
		} else {
			for i := 0; i < m; i++ {
				got = append(got, l[len(l)-1-i])
			}
			l = l[:len(l)-m]
		}
		x.w.Array(2)
		x.w.Bulk(k)
		x.w.Array(len(got))
		for _, v := range got {
			x.w.Bulk(v)
		}
		return x.store(k, tList, e, encodeList(l), len(l) == 0)
	}
	if !blocking || x.c.multiInExec() {
		x.w.NullArray()
		return nil
	}
	x.block(keys, timeout)
	return nil
}
