// The //engramvet:volatile directive: a type the program says never lives
// in the pool.
//
// A type the pool could hold (no map, chan, func, interface or
// unsafe.Pointer in it) that the program only ever keeps on the Go heap,
// such as a reply buffer handed to methods taking the *Tx, is declared
// so in the comment of its type declaration:
//
//	//engramvet:volatile reply buffers are Go heap memory
//	type W struct{ b []byte }
//
// Stores into such objects then need no log. The claim is checked: every
// instantiation in the module (engram.New[T], Make, Root, and generic
// functions and types of the module, which may call them) whose type
// arguments hold a marked type is reported, in the declaring package and,
// through an object fact, in every package that imports it.

package txnlog

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"
)

const volatileDirective = "//engramvet:volatile"

// VolatileType is the fact marking a type declared //engramvet:volatile.
type VolatileType struct{}

func (*VolatileType) AFact()         {}
func (*VolatileType) String() string { return "volatile" }

// markVolatile records and exports the package's marked types.
func (c *checker) markVolatile() {
	c.volatile = map[*types.TypeName]bool{}
	for _, f := range c.pass.Files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if !hasDirective(doc, volatileDirective) {
					continue
				}
				if tn, ok := c.pass.TypesInfo.Defs[ts.Name].(*types.TypeName); ok {
					c.volatile[tn] = true
					c.pass.ExportObjectFact(tn, &VolatileType{})
				}
			}
		}
	}
}

func hasDirective(doc *ast.CommentGroup, directive string) bool {
	if doc == nil {
		return false
	}
	for _, cm := range doc.List {
		if strings.HasPrefix(cm.Text, directive) {
			return true
		}
	}
	return false
}

// isVolatile reports whether a named type is marked //engramvet:volatile
// (here, or in the package that declares it).
func (c *checker) isVolatile(tn *types.TypeName) bool {
	if tn.Pkg() == c.pass.Pkg {
		return c.volatile[tn]
	}
	if tn.Pkg() == nil {
		return false
	}
	var f VolatileType
	return c.pass.ImportObjectFact(tn, &f)
}

// checkVolatileAllocs reports the instantiations that may allocate a
// marked type in the pool.
func (c *checker) checkVolatileAllocs() {
	for id, inst := range c.pass.TypesInfo.Instances {
		obj := c.pass.TypesInfo.Uses[id]
		if obj == nil || obj.Pkg() == nil {
			continue
		}
		if obj.Pkg().Path() != engramPath && obj.Pkg() != c.pass.Pkg && !c.sameModule(obj) {
			continue
		}
		for i := 0; i < inst.TypeArgs.Len(); i++ {
			if tn := c.holdsVolatile(inst.TypeArgs.At(i), map[types.Type]bool{}); tn != nil {
				c.report(id.Pos(), "%s is marked %s but %s[...] may allocate it in the pool", tn.Name(), volatileDirective, id.Name)
			}
		}
	}
}

// holdsVolatile returns a marked type that t is or holds, or nil.
func (c *checker) holdsVolatile(t types.Type, seen map[types.Type]bool) *types.TypeName {
	t = types.Unalias(t)
	if seen[t] {
		return nil
	}
	seen[t] = true
	if n, ok := t.(*types.Named); ok && c.isVolatile(n.Obj()) {
		return n.Obj()
	}
	switch u := t.Underlying().(type) {
	case *types.Pointer:
		return c.holdsVolatile(u.Elem(), seen)
	case *types.Slice:
		return c.holdsVolatile(u.Elem(), seen)
	case *types.Array:
		return c.holdsVolatile(u.Elem(), seen)
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			if tn := c.holdsVolatile(u.Field(i).Type(), seen); tn != nil {
				return tn
			}
		}
	}
	return nil
}
