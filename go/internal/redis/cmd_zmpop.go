// cmd_zmpop.go: ZMPOP and BZMPOP (pop up to COUNT elements from the MIN or
// MAX end of the first non-empty of several sorted sets), BZPOPMIN and
// BZPOPMAX. The blocking forms park like BLPOP (pubsub.go) and wake when a
// key they wait on holds a sorted set.
//
// Crash behaviour: the pop is part of the command's region.
package redis

func init() {
	reg("zmpop", -4, "w", k0, func(x *ctx) error { return zmpop(x, 1, false) })
	reg("bzmpop", -5, "w", k0, func(x *ctx) error { return zmpop(x, 2, true) })
	reg("bzpopmin", -3, "w", [3]int{1, -2, 1}, func(x *ctx) error { return bzpop(x, false) })
	reg("bzpopmax", -3, "w", [3]int{1, -2, 1}, func(x *ctx) error { return bzpop(x, true) })
}

// zmpop: first is the index of numkeys.
func zmpop(x *ctx, first int, blocking bool) error {
	m, ok := parseMPop(x, first, blocking, "min", "max")
	if !ok {
		return nil
	}
	keys, count, isMax, timeout := m.keys, m.count, !m.first, m.timeout
	for _, k := range keys {
		z, ok, err := x.zsetObj(k)
		if err != nil || !ok {
			return err
		}
		if z.e == nil {
			continue
		}
		got, err := zpopN(z, count, isMax)
		if err != nil {
			return err
		}
		x.w.Array(2)
		x.w.Bulk(k)
		x.w.Array(len(got))
		for _, g := range got {
			x.w.Array(2)
			x.w.BulkS(g.member)
			x.w.Double(g.score)
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

// bzpop is BZPOPMIN/BZPOPMAX key [key ...] timeout.
func bzpop(x *ctx, isMax bool) error {
	t, ok := timeoutArg(x, len(x.args)-1)
	if !ok {
		return nil
	}
	keys := x.args[1 : len(x.args)-1]
	for _, k := range keys {
		z, ok, err := x.zsetObj(k)
		if err != nil || !ok {
			return err
		}
		if z.e == nil {
			continue
		}
		got, err := zpopN(z, 1, isMax)
		if err != nil {
			return err
		}
		x.w.Array(3)
		x.w.Bulk(k)
		x.w.BulkS(got[0].member)
		x.w.Double(got[0].score)
		return nil
	}
	if x.c.multiInExec() {
		x.w.NullArray()
		return nil
	}
	x.block(keys, t)
	return nil
}
