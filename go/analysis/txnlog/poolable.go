// Types the pool cannot hold.
//
// The Engram Go package refuses to allocate (New, Make, Root) a type with a
// map, channel, function, interface or unsafe.Pointer anywhere in it
// (through fields, arrays, and what its pointers and slices point to:
// ErrUnsupportedType), since such a value would point into the Go heap.
// So an object of such a type is never pool memory, however it was reached
// (a *Server parameter of a method taking the *Tx, say), and neither is
// anything inside it: a store there needs no log.

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

// inVolatileObject reports whether the location addr points to lies in an
// object the pool cannot hold: addr's pointee, or any struct or array it is
// a field or element of (following field and array-element addressing).
func inVolatileObject(addr ssa.Value) bool {
	for {
		if p, ok := addr.Type().Underlying().(*types.Pointer); ok && !poolable(p.Elem()) {
			return true
		}
		switch a := addr.(type) {
		case *ssa.FieldAddr:
			addr = a.X
		case *ssa.IndexAddr:
			if s, ok := a.X.Type().Underlying().(*types.Slice); ok {
				return !poolable(s.Elem())
			}
			addr = a.X
		default:
			return false
		}
	}
}
