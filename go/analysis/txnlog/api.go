// Recognising the Engram Go API in SSA.
//
// The analyzer knows the engram package only by its import path and the names
// of its functions (see doc.go for the list). Everything here is a pure query
// on types and SSA; nothing is cached, nothing can fail.

package txnlog

import (
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// engramPath is the import path of the Engram Go package.
const engramPath = "github.com/engram-pm/engram-go"

// isEngramNamed reports whether t is (a pointer to) engram.<name>.
func isEngramNamed(t types.Type, name string) bool {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	obj := n.Obj()
	return obj.Pkg() != nil && obj.Pkg().Path() == engramPath && obj.Name() == name
}

// isTxPtr reports whether t is *engram.Tx.
func isTxPtr(t types.Type) bool {
	_, ok := types.Unalias(t).(*types.Pointer)
	return ok && isEngramNamed(t, "Tx")
}

// calleeObj returns the declared function a static call targets (the generic
// origin for instantiations), or nil for dynamic calls, builtins and
// synthetic wrappers.
func calleeObj(c *ssa.CallCommon) *types.Func {
	if c.IsInvoke() {
		return nil
	}
	fn := c.StaticCallee()
	if fn == nil {
		return nil
	}
	return funcObj(fn)
}

// funcObj returns the declared function fn is or instantiates, or nil.
func funcObj(fn *ssa.Function) *types.Func {
	if fn.Origin() != nil {
		fn = fn.Origin()
	}
	obj, _ := fn.Object().(*types.Func)
	if obj == nil {
		return nil
	}
	return obj.Origin()
}

// engramFunc returns the name of the engram API function or method a call
// targets ("Log", "LogSlice", "New", "Txn", ...), or "" if it is not one.
// Methods are named "Tx.Log", "Pool.Txn".
func engramFunc(c *ssa.CallCommon) string {
	obj := calleeObj(c)
	if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != engramPath {
		return ""
	}
	sig := obj.Type().(*types.Signature)
	if recv := sig.Recv(); recv != nil {
		if isEngramNamed(recv.Type(), "Tx") {
			return "Tx." + obj.Name()
		}
		if isEngramNamed(recv.Type(), "Pool") {
			return "Pool." + obj.Name()
		}
		return ""
	}
	return obj.Name()
}

// freshFuncs return memory allocated in the running transaction.
var freshFuncs = map[string]bool{"New": true, "Make": true, "String": true, "Bytes": true}

// txParam returns fn's *engram.Tx parameter, if it has one: such a
// function runs inside a transaction and is checked on its own.
func txParam(fn *ssa.Function) *ssa.Parameter {
	for _, p := range fn.Params {
		if isTxPtr(p.Type()) {
			return p
		}
	}
	return nil
}

// pointerish reports whether a value of type t can refer to memory: only
// such values carry a provenance worth computing.
func pointerish(t types.Type) bool {
	return pointerishDepth(t, 0)
}

func pointerishDepth(t types.Type, depth int) bool {
	if depth > 8 {
		return true
	}
	switch u := t.Underlying().(type) {
	case *types.Pointer, *types.Slice, *types.Interface, *types.Signature, *types.Tuple:
		return true
	case *types.Basic:
		return u.Kind() == types.UnsafePointer
	case *types.Array:
		return pointerishDepth(u.Elem(), depth+1)
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			if pointerishDepth(u.Field(i).Type(), depth+1) {
				return true
			}
		}
	}
	return false
}
