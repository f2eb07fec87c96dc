// cmd_sort.go: SORT and SORT_RO (BY pattern or nosort, LIMIT, GET patterns
// with '#' and 'key->field', ASC/DESC, ALPHA, STORE) over lists, sets and
// sorted sets.
//
// Crash behaviour: STORE writes its list inside the command's region.
package redis

import (
	"sort"
	"strings"
)

func init() {
	reg("sort", -2, "w", k1, cmdSort)
	reg("sort_ro", -2, "r", k1, cmdSort)
}

type sortOpts struct {
	by          []byte
	gets        [][]byte
	desc, alpha bool
	off, cnt    int64
	store       []byte
}

func parseSort(x *ctx) (sortOpts, bool) {
	o := sortOpts{cnt: -1}
	a := x.args
	for i := 2; i < len(a); i++ {
		switch {
		case eq(a[i], "asc"):
			o.desc = false
		case eq(a[i], "desc"):
			o.desc = true
		case eq(a[i], "alpha"):
			o.alpha = true
		case eq(a[i], "limit") && i+2 < len(a):
			off, ok1 := parseInt(a[i+1])
			cnt, ok2 := parseInt(a[i+2])
			if !ok1 || !ok2 {
				x.w.Err(errNotInt)
				return o, false
			}
			o.off, o.cnt = off, cnt
			i += 2
		case eq(a[i], "by") && i+1 < len(a):
			o.by = a[i+1]
			i++
		case eq(a[i], "get") && i+1 < len(a):
			o.gets = append(o.gets, a[i+1])
			i++
		case eq(a[i], "store") && i+1 < len(a) && x.name == "sort":
			o.store = a[i+1]
			i++
		default:
			x.w.Err(errSyntax)
			return o, false
		}
	}
	return o, true
}

// lookupPattern resolves "pre*post" or "pre*post->field" for element el.
func (x *ctx) lookupPattern(pat []byte, el string) ([]byte, bool, error) {
	p := string(pat)
	if p == "#" {
		return []byte(el), true, nil
	}
	star := strings.IndexByte(p, '*')
	if star < 0 {
		return nil, false, nil
	}
	field := ""
	if arrow := strings.Index(p[star:], "->"); arrow >= 0 && star+arrow+2 < len(p) {
		field = p[star+arrow+2:]
		p = p[:star+arrow]
	}
	key := []byte(p[:star] + el + p[star+1:])
	e, err := x.lookup(key)
	if err != nil || e == nil {
		return nil, false, err
	}
	if field == "" {
		if e.Type != tString {
			return nil, false, nil
		}
		return append([]byte(nil), e.val()...), true, nil
	}
	if e.Type != tHash {
		return nil, false, nil
	}
	if e.Coll != nil {
		v, ok := e.Coll.hget([]byte(field))
		return append([]byte(nil), v...), ok, nil
	}
	v, ok := loadHash(e).vals[field]
	return v, ok, nil
}

func cmdSort(x *ctx) error {
	o, ok := parseSort(x)
	if !ok {
		return nil
	}
	e, err := x.lookup(x.args[1])
	if err != nil {
		return err
	}
	var items []string
	if e != nil {
		switch e.Type {
		case tList:
			for _, it := range loadList(e) {
				items = append(items, string(it))
			}
		case tSet:
			items = loadSet(e).keys
		case tZSet:
			for _, el := range loadZSet(e).els {
				items = append(items, el.member)
			}
		default:
			x.w.Err(errWrongType)
			return nil
		}
	}
	nosort := o.by != nil && !strings.Contains(string(o.by), "*")
	if !nosort {
		type keyed struct {
			item string
			str  string
			num  float64
		}
		ks := make([]keyed, len(items))
		for i, it := range items {
			v := []byte(it)
			if o.by != nil {
				if v, _, err = x.lookupPattern(o.by, it); err != nil {
					return err
				}
			}
			ks[i] = keyed{item: it, str: string(v)}
			if !o.alpha {
				if len(v) == 0 {
					ks[i].num = 0
				} else if f, ok := parseFloat(v); ok {
					ks[i].num = f
				} else {
					x.w.Err("ERR One or more scores can't be converted into double")
					return nil
				}
			}
		}
		sort.SliceStable(ks, func(i, j int) bool {
			a, b := ks[i], ks[j]
			var less bool
			if o.alpha {
				less = a.str < b.str || (a.str == b.str && a.item < b.item)
			} else {
				less = a.num < b.num || (a.num == b.num && a.item < b.item)
			}
			if o.desc {
				return !less && !(a.item == b.item)
			}
			return less
		})
		for i := range ks {
			items[i] = ks[i].item
		}
	}
	if o.off < 0 {
		o.off = 0
	}
	if o.off > int64(len(items)) {
		items = nil
	} else {
		items = items[o.off:]
	}
	if o.cnt >= 0 && o.cnt < int64(len(items)) {
		items = items[:o.cnt]
	}
	var out [][]byte
	var present []bool
	for _, it := range items {
		if len(o.gets) == 0 {
			out, present = append(out, []byte(it)), append(present, true)
			continue
		}
		for _, g := range o.gets {
			v, ok, err := x.lookupPattern(g, it)
			if err != nil {
				return err
			}
			out, present = append(out, v), append(present, ok)
		}
	}
	if o.store != nil {
		x.w.Int(int64(len(out)))
		if len(out) == 0 {
			_, err := x.del(o.store)
			return err
		}
		err := x.putValue(o.store, tList, out)
		x.markReady(o.store)
		return err
	}
	x.w.Array(len(out))
	for i, v := range out {
		if present[i] {
			x.w.Bulk(v)
		} else {
			x.w.Null()
		}
	}
	return nil
}
