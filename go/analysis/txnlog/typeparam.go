// Method calls on type parameters.
//
// Inside a generic function, d.m(...) on a value whose type is a type
// parameter D calls the method m of whatever type D is instantiated with.
// When D's constraint has a finite type set (a union of types, as in
// interface{ *pDict | *pZDict; m() }), that is one of a known list: the
// call is checked once per member type, through that type's method m, as
// a static call would be, and the verdicts combine (every member's stores
// and "cannot decide"s are reported, a log counts only if every member
// makes it). An infinite type set (a constraint of methods only, any, or a
// ~T term whose T is not a pointer: any defined type over T may declare
// m) keeps the interface-call verdict: "cannot decide".
//
// Invariant: each member's effects are marked with the member (Effect.Member,
// TParam), and a caller drops them only where it instantiates D with
// another type (bindEffect); anywhere it cannot tell, it keeps them.

package txnlog

import (
	"fmt"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// target is one function a call may run, with its arguments as the
// function numbers its parameters.
type target struct {
	fn   *ssa.Function // an instance's effects are bound by its TypeArgs
	args []ssa.Value
	// member: reached through a type parameter, for this member type
	// (what holds only then, and is named so in messages)
	member *memberOf
}

// memberOf is the member type a method call on a type parameter resolved to.
type memberOf struct {
	tparam int        // 1 + the type parameter's index in the calling function
	name   string     // D
	typ    types.Type // *pDict
}

// staticTarget is the target of a static call.
func staticTarget(common *ssa.CallCommon) target {
	return target{fn: common.StaticCallee(), args: callArgs(common)}
}

// memberTargets resolves a method call on a type parameter whose type set
// is finite: one target per member type that has the method. ok is false
// for any other call, and for an infinite type set. unresolved lists the
// members whose method the analysis cannot reach (a promoted method of a
// generic type, ...): those calls are "cannot decide".
func (fi *funcInfo) memberTargets(common *ssa.CallCommon) (ts []target, unresolved []types.Type, ok bool) {
	if !common.IsInvoke() {
		return nil, nil, false
	}
	tp, isParam := types.Unalias(common.Value.Type()).(*types.TypeParam)
	if !isParam {
		return nil, nil, false
	}
	members, finite := typeSetTerms(tp)
	if !finite {
		return nil, nil, false
	}
	args := append([]ssa.Value{common.Value}, common.Args...)
	for _, t := range members {
		fn, has := fi.c.methodOf(t, common.Method)
		switch {
		case !has:
			continue // not in the type set: it lacks the method
		case fn == nil:
			unresolved = append(unresolved, t)
			continue
		}
		m := &memberOf{name: tp.Obj().Name(), typ: t}
		if n := memberNamed(t); n != nil && n.TypeArgs().Len() == 0 {
			m.tparam = typeParamIndex(fi.fn, tp) + 1
		}
		ts = append(ts, target{fn: fn, args: args, member: m})
	}
	return ts, unresolved, true
}

// typeSetTerms lists the types of a type parameter's type set that can
// have methods, and whether that list is complete: the terms of a union in
// its constraint (a type set is within each union it embeds) whose terms
// are all types (T) or pointers (~*T: a defined type over a pointer has no
// methods, so *T is the only member a method can be called on).
func typeSetTerms(tp *types.TypeParam) ([]types.Type, bool) {
	iface, ok := tp.Constraint().Underlying().(*types.Interface)
	if !ok {
		return nil, false
	}
	return finiteTerms(iface, 0)
}

func finiteTerms(iface *types.Interface, depth int) ([]types.Type, bool) {
	if depth > 8 {
		return nil, false
	}
	for i := 0; i < iface.NumEmbeddeds(); i++ {
		switch e := types.Unalias(iface.EmbeddedType(i)).(type) {
		case *types.Union:
			if ts, ok := unionTerms(e); ok {
				return ts, true
			}
		default:
			if inner, ok := e.Underlying().(*types.Interface); ok {
				if ts, ok := finiteTerms(inner, depth+1); ok {
					return ts, true
				}
				continue
			}
			return []types.Type{e}, true // interface{ T }: a single term
		}
	}
	return nil, false
}

// unionTerms lists a union's types if each term is a type or ~ of a
// pointer type (see typeSetTerms).
func unionTerms(u *types.Union) ([]types.Type, bool) {
	var ts []types.Type
	for i := 0; i < u.Len(); i++ {
		t := types.Unalias(u.Term(i).Type())
		if _, isPtr := t.Underlying().(*types.Pointer); u.Term(i).Tilde() && !isPtr {
			return nil, false
		}
		if _, isIface := t.Underlying().(*types.Interface); isIface {
			return nil, false
		}
		ts = append(ts, t)
	}
	return ts, true
}

// methodOf is the function a call of method m runs on a value of type t:
// has is false if t's method set lacks m (t cannot instantiate the type
// parameter); fn is nil if the analysis cannot build it.
func (c *checker) methodOf(t types.Type, m *types.Func) (fn *ssa.Function, has bool) {
	prog := c.pkg.Prog
	sel := prog.MethodSets.MethodSet(t).Lookup(m.Pkg(), m.Name())
	if sel == nil {
		return nil, false
	}
	if fn := prog.MethodValue(sel); fn != nil {
		return fn, true
	}
	// a method declared on a generic type (t mentions type parameters):
	// its generic body, when the receiver is t itself
	obj, _ := sel.Obj().(*types.Func)
	if obj == nil || len(sel.Index()) != 1 || sel.Indirect() {
		return nil, true
	}
	return prog.FuncValue(obj.Origin()), true
}

// memberNamed is the named type t is or points to, or nil.
func memberNamed(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, _ := t.(*types.Named)
	return n
}

// typeParamIndex is tp's index among fn's type parameters (a closure's
// are its enclosing function's), or -1.
func typeParamIndex(fn *ssa.Function, tp *types.TypeParam) int {
	for i := 0; i < fn.TypeParams().Len(); i++ {
		if fn.TypeParams().At(i) == tp {
			return i
		}
	}
	return -1
}

// typeString names a type for messages (package names, none for this
// package's types).
func (c *checker) typeString(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string {
		if p == c.pass.Pkg {
			return ""
		}
		return p.Name()
	})
}

// typeKey identifies a type across packages (facts hold it as a string).
func typeKey(t types.Type) string { return types.TypeString(types.Unalias(t), nil) }

// memberEffect marks one effect of a member's method as holding only for
// that member: named in messages ("for D = *B"), and, when the member is
// a plain named type (or a pointer to one), dropped by callers that
// instantiate D with another type.
func (fi *funcInfo) memberEffect(e Effect, m *memberOf) Effect {
	suffix := fmt.Sprintf(" for %s = %s", m.name, fi.c.typeString(m.typ))
	if e.Undecided != "" {
		e.Undecided += suffix
	} else {
		e.What += suffix
	}
	e.TParam, e.Member = 0, ""
	if m.tparam > 0 {
		e.TParam, e.Member = m.tparam, typeKey(m.typ)
	}
	return e
}

// bindEffect adapts a callee's effect to a call with the given type
// arguments: an effect that holds only when the callee's type parameter is
// Member is dropped (false) when the call's type argument is another type,
// stays conditional on the caller's own type parameter when that is the
// argument, and holds unconditionally otherwise.
func (fi *funcInfo) bindEffect(e Effect, typeArgs []types.Type) (Effect, bool) {
	if e.TParam <= 0 {
		return e, true
	}
	k := e.TParam - 1
	e.TParam = 0
	if k >= len(typeArgs) {
		e.Member = ""
		return e, true
	}
	arg := types.Unalias(typeArgs[k])
	if tp, ok := arg.(*types.TypeParam); ok {
		if j := typeParamIndex(fi.fn, tp); j >= 0 {
			e.TParam = j + 1
			return e, true
		}
		e.Member = ""
		return e, true
	}
	if typeKey(arg) != e.Member {
		return e, false
	}
	e.Member = ""
	return e, true
}
