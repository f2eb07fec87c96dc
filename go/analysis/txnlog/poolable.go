// Types the pool cannot hold.
//
// The Engram Go package refuses to allocate (New, Make, Root) a type with a
// map, channel, function, interface or unsafe.Pointer anywhere in it
// (through fields, arrays, and what its pointers and slices point to:
// ErrUnsupportedType), since such a value would point into the Go heap.
// So an object of such a type is never pool memory, however it was reached
// (a *Server parameter of a method taking the *Tx, say), and neither is
// anything inside it: a store there needs no log. Nor is an unexported
// type of the package being checked that no instantiation in it names
// (engram.New[T] and the like; see allocatable).

package txnlog

import (
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// poolable reports whether values of t may live in the pool (the rule of
// the engram package's layout walk; type parameters may be anything).
func poolable(t types.Type) bool {
	return poolableSeen(t, map[types.Type]bool{})
}

func poolableSeen(t types.Type, seen map[types.Type]bool) bool {
	t = types.Unalias(t)
	if seen[t] {
		return true
	}
	seen[t] = true
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return u.Kind() != types.UnsafePointer
	case *types.Pointer:
		return poolableSeen(u.Elem(), seen)
	case *types.Slice:
		return poolableSeen(u.Elem(), seen)
	case *types.Array:
		return poolableSeen(u.Elem(), seen)
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			if !poolableSeen(u.Field(i).Type(), seen) {
				return false
			}
		}
		return true
	case *types.Map, *types.Chan, *types.Signature, *types.Interface:
		// a type parameter's underlying type is its constraint interface
		_, isParam := t.(*types.TypeParam)
		return isParam
	}
	return true
}

// canHold reports whether values of t may live in the pool: t is poolable,
// and is not a type of this package that nothing can allocate there.
func (c *checker) canHold(t types.Type) bool {
	if !poolable(t) {
		return false
	}
	n, ok := types.Unalias(t).(*types.Named)
	if ok && c.isVolatile(n.Obj()) {
		return false // see volatile.go
	}
	if !ok || n.Obj().Pkg() != c.pass.Pkg || n.Obj().Parent() != c.pass.Pkg.Scope() || n.TypeParams().Len() > 0 {
		return true
	}
	return c.allocatable()[n.Obj()]
}

// allocatable is the set of this package's named types that may be
// allocated in the pool: every poolable exported type (another package may
// allocate it), every type argument of an instantiation in this package
// (engram.New[T], Make[T], Root[T], or a generic helper that calls them),
// and whatever those hold: their fields, array and slice elements and
// pointees. An unexported type outside it is never in the pool, since only
// this package can name it.
func (c *checker) allocatable() map[*types.TypeName]bool {
	if c.allocs != nil {
		return c.allocs
	}
	c.allocs = map[*types.TypeName]bool{}
	seen := map[types.Type]bool{}
	var add func(t types.Type)
	add = func(t types.Type) {
		t = types.Unalias(t)
		if seen[t] {
			return
		}
		seen[t] = true
		if n, ok := t.(*types.Named); ok {
			c.allocs[n.Obj()] = true
			for i := 0; i < n.TypeArgs().Len(); i++ {
				add(n.TypeArgs().At(i))
			}
		}
		switch u := t.Underlying().(type) {
		case *types.Pointer:
			add(u.Elem())
		case *types.Slice:
			add(u.Elem())
		case *types.Array:
			add(u.Elem())
		case *types.Struct:
			for i := 0; i < u.NumFields(); i++ {
				add(u.Field(i).Type())
			}
		}
	}
	scope := c.pass.Pkg.Scope()
	for _, name := range scope.Names() {
		if tn, ok := scope.Lookup(name).(*types.TypeName); ok && tn.Exported() && poolable(tn.Type()) {
			add(tn.Type())
		}
	}
	for _, inst := range c.pass.TypesInfo.Instances {
		for i := 0; i < inst.TypeArgs.Len(); i++ {
			add(inst.TypeArgs.At(i))
		}
	}
	return c.allocs
}

// inVolatileObject reports whether the location addr points to lies in an
// object the pool cannot hold: addr's pointee, or any struct or array it is
// a field or element of (following field and array-element addressing).
func (c *checker) inVolatileObject(addr ssa.Value) bool {
	for {
		if p, ok := addr.Type().Underlying().(*types.Pointer); ok && !c.canHold(p.Elem()) {
			return true
		}
		switch a := addr.(type) {
		case *ssa.FieldAddr:
			addr = a.X
		case *ssa.IndexAddr:
			if s, ok := a.X.Type().Underlying().(*types.Slice); ok {
				return !c.canHold(s.Elem())
			}
			addr = a.X
		default:
			return false
		}
	}
}
