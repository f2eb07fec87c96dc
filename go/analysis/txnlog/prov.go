// Provenance: where the memory a value points to may live.
//
// Computed per function as a fixpoint over its SSA values (loops make phis
// depend on themselves). Parameters carry their own bit, so the same result
// serves a transactional function (where parameters are taken to be pool
// memory) and a summary (where the caller decides). Values crossing into a
// closure through a captured variable are "lifted": parameter bits of the
// enclosing function become "pool", since the enclosing function opened the
// transaction over them.
//
// The rules (see doc.go): pool memory comes from engram.Root, from a *Tx
// function's parameters and from anything loaded out of pool or fresh
// memory; engram.New/Make/String/Bytes return fresh memory; new(T), &T{},
// make and Go globals are volatile; a value loaded from a volatile local is
// whatever was stored into that local; anything else is unknown.

package txnlog

import (
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// computeProv runs the fixpoint for fi.
func (fi *funcInfo) computeProv() {
	fi.computing = true
	defer func() { fi.computing = false }()
	fi.prov = map[ssa.Value]Prov{}
	var vals []ssa.Value
	for _, p := range fi.fn.Params {
		vals = append(vals, p)
	}
	for _, fv := range fi.fn.FreeVars {
		vals = append(vals, fv)
	}
	for _, b := range fi.fn.Blocks {
		for _, in := range b.Instrs {
			if v, ok := in.(ssa.Value); ok {
				vals = append(vals, v)
			}
			if st, ok := in.(*ssa.Store); ok {
				fi.stores = append(fi.stores, storeAt{st, pathOf(st.Addr)})
			}
		}
	}
	for round := 0; round < 50; round++ {
		changed := false
		for _, v := range vals {
			p := fi.compute(v)
			if old := fi.prov[v]; old != p {
				fi.prov[v] = p.join(old)
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

// get returns the provenance of v (bottom while the fixpoint runs).
func (fi *funcInfo) get(v ssa.Value) Prov {
	if p, ok := fi.prov[v]; ok {
		return p
	}
	switch v.(type) {
	case *ssa.Const, *ssa.Global, *ssa.Function, *ssa.Builtin:
		return Prov{Flags: provVolatile}
	}
	if owner, ok := v.(interface{ Parent() *ssa.Function }); ok && owner.Parent() != nil && owner.Parent() != fi.fn {
		// a value of an enclosing function (a closure's binding, met when
		// a call of a captured function value is resolved): as captured
		return fi.c.info(owner.Parent()).get(v).lift()
	}
	return Prov{}
}

var errorType = types.Universe.Lookup("error").Type()

// isError reports whether t is the error interface: errors are not data
// the analyzer follows into the pool.
func isError(t types.Type) bool { return types.Identical(t, errorType) }

var volatile = Prov{Flags: provVolatile}
var unknown = Prov{Flags: provUnknown}

func (fi *funcInfo) compute(v ssa.Value) Prov {
	if _, ok := v.(*ssa.Call); !ok && (!pointerish(v.Type()) || isError(v.Type())) {
		return volatile
	}
	if x := through(v); x != nil {
		p := fi.get(x)
		if cv, ok := v.(*ssa.Convert); ok && !pointerish(cv.X.Type()) {
			// from uintptr: pointer arithmetic, or an address from nowhere
			// (a conversion of a pointer, or of an unsafe.Pointer made from
			// one, points where it did)
			p = p.join(unknown)
		}
		return p
	}
	switch v := v.(type) {
	case *ssa.Parameter:
		if isTxPtr(v.Type()) {
			return volatile
		}
		for i, p := range fi.fn.Params {
			if p == v && i < 64 {
				return Prov{Params: 1 << uint(i)}
			}
		}
		return unknown
	case *ssa.FreeVar:
		return fi.freeVarProv(v)
	case *ssa.Alloc, *ssa.MakeSlice, *ssa.MakeMap, *ssa.MakeChan, *ssa.MakeClosure,
		*ssa.Const, *ssa.Global, *ssa.Function, *ssa.Builtin:
		return volatile
	case *ssa.Extract:
		if call, ok := v.Tuple.(*ssa.Call); ok {
			rs := fi.callResults(call)
			if v.Index < len(rs) {
				return rs[v.Index]
			}
		}
		return fi.get(v.Tuple)
	case *ssa.Call:
		var p Prov
		for _, r := range fi.callResults(v) {
			p = p.join(r)
		}
		return p
	case *ssa.UnOp:
		if v.Op == token.MUL {
			return fi.loadProv(v.X)
		}
		if v.Op == token.ARROW {
			return unknown
		}
		return volatile
	case *ssa.Phi:
		var p Prov
		for _, e := range v.Edges {
			p = p.join(fi.get(e))
		}
		return p
	case *ssa.BinOp:
		return volatile
	}
	return unknown
}

// through returns the operand whose provenance v has (addressing inside an
// object, conversions, interface boxing), or nil.
func through(v ssa.Value) ssa.Value {
	switch v := v.(type) {
	case *ssa.FieldAddr:
		return v.X
	case *ssa.IndexAddr:
		return v.X
	case *ssa.Slice:
		return v.X
	case *ssa.ChangeType:
		return v.X
	case *ssa.Convert:
		return v.X
	case *ssa.MakeInterface:
		return v.X
	case *ssa.TypeAssert:
		return v.X
	case *ssa.ChangeInterface:
		return v.X
	case *ssa.SliceToArrayPointer:
		return v.X
	case *ssa.Field:
		return v.X
	case *ssa.Index:
		return v.X
	}
	return nil
}

// loadProv is the provenance of the value loaded from addr.
func (fi *funcInfo) loadProv(addr ssa.Value) Prov {
	a := fi.get(addr)
	res := Prov{Params: a.Params, Flags: a.Flags & provUnknown}
	if a.Flags&(provPool|provFreshExt) != 0 {
		res.Flags |= provPool
	}
	if a.Flags&provFresh != 0 {
		res = res.join(fi.freshLoad(addr))
	}
	if a.Flags&provVolatile != 0 {
		res = res.join(fi.volatileLoad(addr))
	}
	return res
}

// freshLoad is the provenance of a value loaded from memory this function
// allocated in the transaction: what the function stored into such memory
// at the same field (nil, so volatile, if nothing), unless the memory may
// have been written elsewhere, which makes it pool.
func (fi *funcInfo) freshLoad(addr ssa.Value) Prov {
	if fi.freshEscapes() {
		return Prov{Flags: provPool}
	}
	shape := inObjectShape(pathOf(addr))
	res := volatile
	for _, st := range fi.stores {
		if fi.get(st.at.Addr).Flags&provFresh != 0 && sameShape(inObjectShape(st.path), shape) {
			res = res.join(fi.get(st.at.Val))
		}
	}
	if len(shape) > 0 && shape[0].kind == stepElem {
		res = res.join(fi.copiedIntoFresh())
	}
	return res
}

// copiedIntoFresh joins what copy calls put into fresh slices: elements of
// their sources, which are pool memory if the source is.
func (fi *funcInfo) copiedIntoFresh() Prov {
	var res Prov
	for _, b := range fi.fn.Blocks {
		for _, in := range b.Instrs {
			call, ok := in.(ssa.CallInstruction)
			if !ok {
				continue
			}
			c := call.Common()
			if bi, ok := c.Value.(*ssa.Builtin); !ok || bi.Name() != "copy" || len(c.Args) != 2 ||
				fi.get(c.Args[0]).Flags&provFresh == 0 {
				continue
			}
			src := fi.get(c.Args[1])
			res = res.join(Prov{Params: src.Params, Flags: src.Flags &^ (provFresh | provFreshExt)})
			if src.Flags&(provFresh|provFreshExt) != 0 {
				res.Flags |= provPool
			}
		}
	}
	return res
}

// inObjectShape is the tail of a path after its last load: the steps
// inside the object last loaded.
func inObjectShape(p path) []step {
	for i := len(p.steps) - 1; i >= 0; i-- {
		if p.steps[i].kind == stepLoad {
			return p.steps[i+1:]
		}
	}
	return p.steps
}

func sameShape(a, b []step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].kind != b[i].kind || a[i].field != b[i].field {
			return false
		}
	}
	return true
}

// freshEscapes reports whether memory fresh in this function may be
// written by code the analysis does not follow here: passed to a call
// (other than the engram API), captured by a closure, or stored into
// memory that is not local.
func (fi *funcInfo) freshEscapes() bool {
	fresh := func(v ssa.Value) bool { return fi.get(v).Flags&provFresh != 0 }
	for _, b := range fi.fn.Blocks {
		for _, in := range b.Instrs {
			switch in := in.(type) {
			case *ssa.Store:
				dst := fi.get(in.Addr)
				if fresh(in.Val) && (dst.Params != 0 || dst.Flags&^(provVolatile|provFresh) != 0) {
					return true
				}
			case *ssa.MakeClosure:
				for _, bnd := range in.Bindings {
					if fresh(bnd) {
						return true
					}
				}
			case ssa.CallInstruction:
				if fi.callLetsFreshEscape(in.Common(), fresh) {
					return true
				}
			}
		}
	}
	return false
}

func (fi *funcInfo) callLetsFreshEscape(c *ssa.CallCommon, fresh func(ssa.Value) bool) bool {
	if engramFunc(c) != "" {
		return false
	}
	if _, ok := c.Value.(*ssa.Builtin); ok {
		return false // copy into fresh memory: see copiedIntoFresh
	}
	if c.IsInvoke() && fresh(c.Value) {
		return true
	}
	for _, a := range c.Args {
		if fresh(a) {
			return true
		}
	}
	return false
}

// volatileLoad is the provenance of a value loaded from volatile memory:
// what was stored into that local, or unknown for globals and escapes.
func (fi *funcInfo) volatileLoad(addr ssa.Value) Prov {
	return fi.volatileLoadBefore(addr, nil)
}

// volatileLoadBefore is volatileLoad for the memory handed to the call
// at, whose own possible stores are the question being asked.
func (fi *funcInfo) volatileLoadBefore(addr ssa.Value, at ssa.Instruction) Prov {
	base := objectBase(addr)
	switch b := base.(type) {
	case *ssa.Alloc, *ssa.MakeSlice:
		return fi.storesInto(b, nil, at)
	case *ssa.FreeVar:
		p := fi.storesInto(b, nil, at)
		if parent, bind := fi.binding(b); parent != nil {
			if cell, ok := objectBase(bind).(*ssa.Alloc); ok {
				p = p.join(parent.storesInto(cell, fi.fn, nil).lift())
			} else {
				p = p.join(unknown)
			}
		}
		return p
	case *ssa.Global:
		if b == addr { // the variable itself, not a field of it
			return fi.c.globalProv(b)
		}
	case *ssa.Const:
		return volatile
	}
	return unknown
}

// globalProv is what the package stores into a Go global variable (go-pmem
// programs keep their roots in globals): the join over every function of
// the package, lifted (a value stored by one function and loaded by
// another crosses functions). Unknown if the variable is exported, or its
// address is used other than to load or store it.
func (c *checker) globalProv(g *ssa.Global) Prov {
	if p, ok := c.globals[g]; ok {
		return p
	}
	c.globals[g] = Prov{} // in progress: bottom
	if g.Object() == nil || g.Object().Exported() {
		c.globals[g] = unknown
		return unknown
	}
	var res Prov
	partial := false
	for _, fn := range c.allFuncs {
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				p, done := c.globalUse(fn, in, g)
				res, partial = res.join(p), partial || !done
			}
		}
	}
	if partial {
		// a storing function is still computing its provenance: answer
		// for now, ask again in its next round
		delete(c.globals, g)
	} else {
		c.globals[g] = res
	}
	return res
}

// globalUse is what one instruction contributes to a global's provenance,
// and whether that is final (false while fn's provenance is computing).
func (c *checker) globalUse(fn *ssa.Function, in ssa.Instruction, g *ssa.Global) (Prov, bool) {
	var res Prov
	done := true
	for i, op := range in.Operands(nil) {
		if *op != g {
			continue
		}
		switch in := in.(type) {
		case *ssa.Store:
			if i == 0 { // the address
				fi := c.info(fn)
				res, done = res.join(fi.get(in.Val).lift()), !fi.computing
			} else {
				res = res.join(unknown)
			}
		case *ssa.UnOp, *ssa.DebugRef:
		default:
			res = res.join(unknown)
		}
	}
	return res, done
}

// objectBase strips field and array-element addressing off addr.
func objectBase(addr ssa.Value) ssa.Value {
	for {
		switch a := addr.(type) {
		case *ssa.FieldAddr:
			addr = a.X
		case *ssa.IndexAddr:
			addr = a.X
		case *ssa.Slice:
			addr = a.X
		case *ssa.ChangeType:
			addr = a.X
		default:
			return addr
		}
	}
}

// storesInto joins the provenance of every value stored into the object
// at base (a local or a captured variable) in this function and in the
// closures that capture it (but skip); an address of it that escapes
// (stored, passed to a call other than ignore) makes it unknown.
func (fi *funcInfo) storesInto(base ssa.Value, skip *ssa.Function, ignore ssa.Instruction) Prov {
	var res Prov
	seen := map[ssa.Value]bool{}
	var walk func(v ssa.Value)
	walk = func(v ssa.Value) {
		if seen[v] || v.Referrers() == nil {
			return
		}
		seen[v] = true
		for _, r := range *v.Referrers() {
			switch r := r.(type) {
			case *ssa.Store:
				if r.Addr == v {
					res = res.join(fi.get(r.Val))
				} else {
					res = res.join(unknown)
				}
			case *ssa.FieldAddr:
				walk(r)
			case *ssa.IndexAddr:
				walk(r)
			case *ssa.Slice:
				walk(r)
			case *ssa.ChangeType:
				walk(r)
			case *ssa.MakeClosure:
				res = res.join(fi.closureStores(r, v, skip))
			case *ssa.UnOp, *ssa.DebugRef:
				// loads
			case ssa.CallInstruction:
				if b, ok := r.Common().Value.(*ssa.Builtin); ok && (b.Name() == "len" || b.Name() == "cap") {
					continue
				}
				if r == ignore {
					continue
				}
				res = res.join(unknown)
			default:
				res = res.join(unknown)
			}
		}
	}
	walk(base)
	return res
}

// closureStores is what a closure made by mc stores into the captured
// variable v, as seen from outside it.
func (fi *funcInfo) closureStores(mc *ssa.MakeClosure, v ssa.Value, skip *ssa.Function) Prov {
	fn, ok := mc.Fn.(*ssa.Function)
	if !ok || fn == skip {
		return Prov{}
	}
	var res Prov
	for i, b := range mc.Bindings {
		if b == v && i < len(fn.FreeVars) {
			cf := fi.c.info(fn)
			res = res.join(cf.storesInto(cf.fn.FreeVars[i], nil, nil).lift())
		}
	}
	return res
}

// binding returns the enclosing function and the value bound to free
// variable fv where fi's closure is made (nil if not found).
func (fi *funcInfo) binding(fv *ssa.FreeVar) (*funcInfo, ssa.Value) {
	parent := fi.fn.Parent()
	if parent == nil {
		return nil, nil
	}
	idx := -1
	for i, f := range fi.fn.FreeVars {
		if f == fv {
			idx = i
		}
	}
	if idx < 0 || fi.fn.Referrers() == nil {
		return nil, nil
	}
	for _, r := range *fi.fn.Referrers() {
		if mc, ok := r.(*ssa.MakeClosure); ok && mc.Fn == fi.fn && idx < len(mc.Bindings) {
			return fi.c.info(parent), mc.Bindings[idx]
		}
	}
	return nil, nil
}

// freeVarProv: a summary closure gives each free variable its own bit after
// the parameters; other closures take the enclosing function's provenance.
func (fi *funcInfo) freeVarProv(fv *ssa.FreeVar) Prov {
	if !fi.txn {
		for i, f := range fi.fn.FreeVars {
			if f == fv && len(fi.fn.Params)+i < 64 {
				return Prov{Params: 1 << uint(len(fi.fn.Params)+i)}
			}
		}
	}
	parent, bind := fi.binding(fv)
	if parent == nil {
		return unknown
	}
	return parent.get(bind).lift()
}

// callResults is the provenance of each result of a call.
func (fi *funcInfo) callResults(call *ssa.Call) []Prov {
	common := call.Common()
	n := common.Signature().Results().Len()
	out := make([]Prov, n)
	fill := func(p Prov) []Prov {
		for i := range out {
			out[i] = p
			if t := common.Signature().Results().At(i).Type(); !pointerish(t) || isError(t) {
				out[i] = volatile
			}
		}
		return out
	}
	if b, ok := common.Value.(*ssa.Builtin); ok {
		switch {
		case b.Name() == "append" && len(common.Args) > 0:
			return fill(fi.get(common.Args[0]).join(volatile))
		case unsafeViews[b.Name()] && len(common.Args) > 0:
			return fill(fi.get(common.Args[0]))
		}
		return fill(volatile)
	}
	switch name := engramFunc(common); {
	case freshFuncs[name]:
		return fill(Prov{Flags: provFresh})
	case name == "Root":
		return fill(Prov{Flags: provPool})
	case name != "":
		return fill(volatile)
	}
	// a static callee, or each member's method (type parameters): joined
	ts := fi.targets(common)
	if len(ts) == 0 {
		return fill(unknown)
	}
	for _, t := range ts {
		sum := fi.c.summaryOfFunc(t.fn)
		if sum == nil || len(sum.Results) != n {
			return fill(unknown)
		}
		for i, r := range sum.Results {
			p := Prov{Flags: r.Flags}
			if p.Flags&provFresh != 0 {
				// allocated by the callee: what its fields hold is not known here
				p.Flags = p.Flags&^provFresh | provFreshExt
			}
			for j := 0; j < 64; j++ {
				if r.Params&(1<<uint(j)) != 0 {
					if j < len(t.args) {
						p = p.join(fi.get(t.args[j]))
					} else {
						p = p.join(unknown)
					}
				}
			}
			out[i] = out[i].join(p)
		}
	}
	return out
}

// unsafeViews are the unsafe builtins whose result points into the memory
// their first argument points to (or, for unsafe.Slice and String, at).
var unsafeViews = map[string]bool{"SliceData": true, "StringData": true, "Slice": true, "String": true, "Add": true}

// callArgs lists the arguments of a static call as the callee numbers its
// parameters: receiver, arguments, then closure bindings.
func callArgs(c *ssa.CallCommon) []ssa.Value {
	args := append([]ssa.Value(nil), c.Args...)
	if mc, ok := c.Value.(*ssa.MakeClosure); ok {
		args = append(args, mc.Bindings...)
	}
	return args
}
