// Access paths and log coverage.
//
// An access path names a memory location the way the source does: a root
// value (a parameter, a call result, a phi, ...) followed by steps: a field,
// an array element (both inside the same object), a load (follow the pointer
// or slice stored there) and a slice element (inside the slice's backing
// array). Two paths with the same root and equal steps name the same
// location; "equal" for an index is value identity or equal constants, and
// otherwise undecidable.
//
// A log covers a store when the logged object path is a prefix of the stored
// path and the rest of the stored path stays inside the object (fields and
// array elements only), or when a logged slice range holds the stored
// element. The answer is yes, no, or "cannot decide" with a reason.

package txnlog

import (
	"go/constant"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

type step struct {
	kind  int
	field int
	name  string
	index ssa.Value // nil: unknown
}

type path struct {
	root  ssa.Value
	steps []step
}

func (p path) with(s ...step) path {
	out := make([]step, 0, len(p.steps)+len(s))
	out = append(append(out, p.steps...), s...)
	return path{p.root, out}
}

// pathOf returns the access path of a pointer, slice or address value.
func pathOf(v ssa.Value) path {
	switch v := v.(type) {
	case *ssa.FieldAddr:
		return pathOf(v.X).with(step{kind: stepField, field: v.Field, name: fieldName(v.X.Type(), v.Field)})
	case *ssa.IndexAddr:
		base, kind := elemBase(v.X)
		return base.with(step{kind: kind, index: v.Index})
	case *ssa.UnOp:
		if v.Op == token.MUL {
			return pathOf(v.X).with(step{kind: stepLoad})
		}
	case *ssa.Field:
		// A field of a loaded struct is the load of the field.
		if p := pathOf(v.X); len(p.steps) > 0 && p.steps[len(p.steps)-1].kind == stepLoad {
			p.steps = p.steps[:len(p.steps)-1]
			return p.with(step{kind: stepField, field: v.Field, name: fieldName(v.X.Type(), v.Field)}, step{kind: stepLoad})
		}
	case *ssa.Index:
		if p := pathOf(v.X); len(p.steps) > 0 && p.steps[len(p.steps)-1].kind == stepLoad {
			p.steps = p.steps[:len(p.steps)-1]
			return p.with(step{kind: stepArr, index: v.Index}, step{kind: stepLoad})
		}
	case *ssa.ChangeType:
		return pathOf(v.X)
	case *ssa.Slice:
		if isZero(v.Low) && v.High == nil && v.Max == nil {
			if _, ok := v.X.Type().Underlying().(*types.Slice); ok {
				return pathOf(v.X)
			}
		}
	}
	return path{root: v}
}

// elemBase returns the path whose elements x indexes and the step kind: the
// array itself for a pointer to an array (or a slice of one from 0), the
// slice value otherwise.
func elemBase(x ssa.Value) (path, int) {
	if s, ok := x.(*ssa.Slice); ok && isZero(s.Low) {
		if _, ok := s.X.Type().Underlying().(*types.Pointer); ok {
			return pathOf(s.X), stepArr
		}
		return pathOf(s.X), stepElem
	}
	if _, ok := x.Type().Underlying().(*types.Pointer); ok {
		return pathOf(x), stepArr
	}
	return pathOf(x), stepElem
}

func fieldName(ptr types.Type, i int) string {
	t := ptr.Underlying()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem().Underlying()
	}
	if st, ok := t.(*types.Struct); ok && i < st.NumFields() {
		return st.Field(i).Name()
	}
	return "?"
}

func isZero(v ssa.Value) bool {
	if v == nil {
		return true
	}
	c, ok := v.(*ssa.Const)
	return ok && c.Value != nil && constant.Sign(c.Value) == 0
}

// tri is a three-valued answer.
type tri int

const (
	no tri = iota
	maybe
	yes
)

func constInt(v ssa.Value) (int64, bool) {
	c, ok := v.(*ssa.Const)
	if !ok || c.Value == nil || c.Value.Kind() != constant.Int {
		return 0, false
	}
	return constant.Int64Val(c.Value)
}

// canon identifies index values that are equal though distinct in SSA:
// loads of a captured variable the closure never assigns (from, to in
// LogSlice(tx, a[from:from+1]); a[from] = x).
func canon(v ssa.Value) ssa.Value {
	u, ok := v.(*ssa.UnOp)
	if !ok || u.Op != token.MUL {
		return v
	}
	fv, ok := u.X.(*ssa.FreeVar)
	if !ok || fv.Referrers() == nil {
		return v
	}
	for _, r := range *fv.Referrers() {
		switch r.(type) {
		case *ssa.UnOp, *ssa.DebugRef:
		default:
			return v // assigned, or handed on: may change
		}
	}
	return fv
}

// sameIndex compares two index values.
func sameIndex(a, b ssa.Value) tri {
	if a == nil || b == nil {
		return maybe
	}
	if canon(a) == canon(b) {
		return yes
	}
	x, ok1 := constInt(a)
	y, ok2 := constInt(b)
	if ok1 && ok2 {
		if x == y {
			return yes
		}
		return no
	}
	return maybe
}

// matchPrefix compares the first len(pre.steps) steps of p with pre.
func matchPrefix(pre, p path) tri {
	if pre.root != p.root || len(pre.steps) > len(p.steps) {
		return no
	}
	res := yes
	for i, s := range pre.steps {
		t := p.steps[i]
		if s.kind != t.kind || s.field != t.field {
			return no
		}
		if s.kind == stepArr || s.kind == stepElem {
			switch sameIndex(s.index, t.index) {
			case no:
				return no
			case maybe:
				res = maybe
			}
		}
	}
	return res
}

// inObject reports whether steps stay inside one object.
func inObject(steps []step) bool {
	for _, s := range steps {
		if s.kind != stepField && s.kind != stepArr {
			return false
		}
	}
	return true
}

// region is what one log call covers: the object at obj, or the elements
// [lo, hi) of base (nil lo is 0, nil hi is the length).
type region struct {
	at    ssa.Instruction
	slice bool
	obj   path
	base  path
	kind  int // stepElem or stepArr for slice regions
	lo    ssa.Value
	hi    ssa.Value
	// from: where a batched range was added (at is the LogBatch that logs
	// it); stores from there on may kill it. Nil for other logs.
	from ssa.Instruction
	// virtual: not a log call but a store already reported, assumed logged
	// for the rest of the function (never part of a summary)
	virtual bool
}

// covers reports whether r covers a store to p made by at.
func (r region) covers(p path, at ssa.Instruction) tri {
	if !r.slice {
		m := matchPrefix(r.obj, p)
		if m == no || !inObject(p.steps[len(r.obj.steps):]) {
			return no
		}
		return m
	}
	n := len(r.base.steps)
	if len(p.steps) <= n || p.steps[n].kind != r.kind || !inObject(p.steps[n+1:]) {
		return no
	}
	m := matchPrefix(r.base, p)
	if m == no {
		return no
	}
	k := p.steps[n].index
	if inLoopRange(k, r.lo, r.hi, at) {
		return m
	}
	return min(m, inRange(k, r.lo, r.hi, r.base))
}

// inRange decides lo <= k < hi; a store index is always below the length.
func inRange(k, lo, hi ssa.Value, base path) tri {
	low := yes
	if !isZero(lo) {
		low = atLeast(k, lo)
	}
	high := yes
	if hi != nil && !isLen(hi, base) {
		high = below(k, lo, hi)
	}
	return min(low, high)
}

func atLeast(k, lo ssa.Value) tri {
	if k != nil && canon(k) == canon(lo) {
		return yes
	}
	x, ok1 := constInt(k)
	y, ok2 := constInt(lo)
	if k != nil && ok1 && ok2 {
		if x >= y {
			return yes
		}
		return no
	}
	return maybe
}

func below(k, lo, hi ssa.Value) tri {
	x, ok1 := constInt(k)
	y, ok2 := constInt(hi)
	if k != nil && ok1 && ok2 {
		if x < y {
			return yes
		}
		return no
	}
	// hi = k+1, or hi = lo+1 with k = lo.
	if b, ok := hi.(*ssa.BinOp); ok && b.Op == token.ADD {
		if one, ok := constInt(b.Y); ok && one == 1 && k != nil &&
			(canon(b.X) == canon(k) || (lo != nil && canon(b.X) == canon(lo) && canon(k) == canon(lo))) {
			return yes
		}
	}
	return maybe
}

// inLoopRange recognises the counted loop over a logged range:
//
//	engram.LogSlice(tx, s[lo:hi])
//	for k := lo; k < hi; k++ { s[k] = ... }
//
// k is a phi of lo and k+1, and the store is dominated by the true branch
// of k < hi.
func inLoopRange(k, lo, hi ssa.Value, at ssa.Instruction) bool {
	phi, ok := k.(*ssa.Phi)
	if !ok || len(phi.Edges) != 2 || hi == nil || at == nil {
		return false
	}
	start, step := false, false
	for _, e := range phi.Edges {
		if sameIndex(e, lo) == yes || (lo == nil && isZero(e)) {
			start = true
		}
		if b, ok := e.(*ssa.BinOp); ok && b.Op == token.ADD && b.X == phi {
			if one, ok := constInt(b.Y); ok && one == 1 {
				step = true
			}
		}
	}
	if !start || !step || phi.Referrers() == nil {
		return false
	}
	for _, r := range *phi.Referrers() {
		cmp, ok := r.(*ssa.BinOp)
		if !ok || cmp.Op != token.LSS || cmp.X != phi || sameIndex(cmp.Y, hi) != yes {
			continue
		}
		for _, use := range *cmp.Referrers() {
			if iff, ok := use.(*ssa.If); ok && iff.Cond == cmp && iff.Block().Succs[0].Dominates(at.Block()) {
				return true
			}
		}
	}
	return false
}

// isLen reports whether v is len(x) of the slice the region is over.
func isLen(v ssa.Value, base path) bool {
	call, ok := v.(*ssa.Call)
	if !ok {
		return false
	}
	b, ok := call.Call.Value.(*ssa.Builtin)
	if !ok || b.Name() != "len" || len(call.Call.Args) != 1 {
		return false
	}
	return matchPrefix(pathOf(call.Call.Args[0]), base) == yes && len(pathOf(call.Call.Args[0]).steps) == len(base.steps)
}

// dominates reports whether instruction a runs before b on every path.
func dominates(a, b ssa.Instruction) bool {
	if a.Block() == b.Block() {
		for _, in := range a.Block().Instrs {
			if in == a {
				return true
			}
			if in == b {
				return false
			}
		}
		return false
	}
	return a.Block().Dominates(b.Block())
}
