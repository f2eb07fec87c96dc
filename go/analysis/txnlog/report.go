// Diagnostics and suggested fixes: how a written location is named in
// messages (as the source spells it) and the tx.Log call -fix inserts.
//
// A fix is offered only when it is safe to evaluate the logged expression
// twice (no calls in it), a *Tx is in scope by name, and the store sits in
// a statement list; otherwise the diagnostic stands without a fix.

package txnlog

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/ssa"
)

// indexExprs maps the SSA positions of written expressions (selector Sel,
// index Lbrack, star Star) and calls (Lparen) to their syntax.
func (c *checker) indexExprs() {
	c.exprs = map[token.Pos]ast.Expr{}
	c.calls = map[token.Pos]*ast.CallExpr{}
	c.ignored = map[string]bool{}
	for _, f := range c.pass.Files {
		for _, cg := range f.Comments {
			for _, cm := range cg.List {
				if strings.HasPrefix(cm.Text, ignoreDirective) {
					p := c.pass.Fset.Position(cm.Pos())
					c.ignored[fmt.Sprintf("%s:%d", p.Filename, p.Line)] = true
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				c.exprs[n.Sel.Pos()] = n
			case *ast.IndexExpr:
				c.exprs[n.Lbrack] = n
			case *ast.StarExpr:
				c.exprs[n.Star] = n
			case *ast.CallExpr:
				c.calls[n.Lparen] = n
			}
			return true
		})
	}
}

// ignoreDirective silences the diagnostics of its line and of the line
// after it (a store the program means to leave unlogged, such as a seeded
// bug for the crash explorer): //engramvet:ignore reason
const ignoreDirective = "//engramvet:ignore"

// isIgnored reports whether pos is covered by an ignore directive.
func (c *checker) isIgnored(pos token.Pos) bool {
	p := c.pass.Fset.Position(pos)
	return c.ignored[fmt.Sprintf("%s:%d", p.Filename, p.Line)] ||
		c.ignored[fmt.Sprintf("%s:%d", p.Filename, p.Line-1)]
}

// site describes a store at pos to the location addr points to.
func (c *checker) site(pos token.Pos, addr ssa.Value) site {
	e := c.exprs[pos]
	if e == nil {
		switch addr.(type) {
		case *ssa.FieldAddr, *ssa.IndexAddr, *ssa.UnOp:
			e = c.exprs[addr.Pos()]
			if pos == token.NoPos {
				pos = addr.Pos()
			}
		}
	}
	s := site{pos: pos}
	if e == nil {
		s.what = "*" + valueName(addr)
		return s
	}
	s.what = types.ExprString(e)
	if hasCall(e) {
		return s
	}
	if star, ok := e.(*ast.StarExpr); ok {
		s.logArg = types.ExprString(star.X)
	} else {
		s.logArg = "&" + s.what
	}
	return s
}

func valueName(v ssa.Value) string {
	switch v := v.(type) {
	case *ssa.Parameter:
		return v.Name()
	case *ssa.FreeVar:
		return v.Name()
	}
	return v.Name()
}

// exprText is the source text of a call argument, or its SSA name.
func (c *checker) exprText(v ssa.Value, callPos token.Pos) string {
	if call := c.calls[callPos]; call != nil {
		for _, a := range call.Args {
			if tv, ok := c.pass.TypesInfo.Types[a]; ok && types.Identical(tv.Type, v.Type()) {
				return types.ExprString(a)
			}
		}
	}
	return valueName(v)
}

func hasCall(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if _, ok := n.(*ast.CallExpr); ok {
			found = true
		}
		return !found
	})
	return found
}

// reportMissing reports an unlogged store, with a fix when one is safe.
func (c *checker) reportMissing(fi *funcInfo, s site) {
	if s.pos == token.NoPos {
		s.pos = fi.fn.Pos()
	}
	var fixes []analysis.SuggestedFix
	if fi.tx != "" && s.logArg != "" {
		fixes = c.insertLog(fi, s)
	}
	if s.callee == "" {
		c.reportFix(s.pos, fixes, "unlogged store to pool memory: %s", s.what)
		return
	}
	c.reportFix(s.pos, fixes, "unlogged store to pool memory in call to %s: %s (%s)", s.callee, s.what, s.at)
}

// insertLog builds the fix: a tx.Log before the statement holding the store.
func (c *checker) insertLog(fi *funcInfo, s site) []analysis.SuggestedFix {
	stmt := c.enclosingStmt(s.pos)
	if stmt == nil {
		return nil
	}
	indent := c.indentAt(stmt.Pos())
	call := fmt.Sprintf("%s.Log(%s)", fi.tx, s.logArg)
	text := call
	if returnsError(fi.fn) {
		text = "if err := " + call + "; err != nil {\n" + indent + "\treturn err\n" + indent + "}"
	}
	text += "\n" + indent
	return []analysis.SuggestedFix{{
		Message:   "insert " + call + " before the store",
		TextEdits: []analysis.TextEdit{{Pos: stmt.Pos(), End: stmt.Pos(), NewText: []byte(text)}},
	}}
}

func returnsError(fn *ssa.Function) bool {
	res := fn.Signature.Results()
	return res.Len() == 1 && types.Identical(res.At(0).Type(), types.Universe.Lookup("error").Type())
}

// enclosingStmt is the statement of a statement list that contains pos.
func (c *checker) enclosingStmt(pos token.Pos) ast.Stmt {
	for _, f := range c.pass.Files {
		if pos < f.Pos() || pos >= f.End() {
			continue
		}
		path, _ := astutil.PathEnclosingInterval(f, pos, pos)
		for i, n := range path {
			st, ok := n.(ast.Stmt)
			if !ok || i+1 >= len(path) {
				continue
			}
			switch path[i+1].(type) {
			case *ast.BlockStmt, *ast.CaseClause, *ast.CommClause:
				return st
			case *ast.FuncLit, *ast.FuncDecl:
				return nil
			}
		}
	}
	return nil
}

// indentAt is the leading white space of the line holding pos.
func (c *checker) indentAt(pos token.Pos) string {
	tf := c.pass.Fset.File(pos)
	if tf == nil || c.pass.ReadFile == nil {
		return "\t"
	}
	src, err := c.pass.ReadFile(tf.Name())
	if err != nil {
		return "\t"
	}
	start := tf.Offset(tf.LineStart(tf.Line(pos)))
	line := src[start:]
	n := len(line) - len(bytes.TrimLeft(line, " \t"))
	return string(line[:n])
}

// logArgForCall renders the tx.Log argument that covers a callee's store,
// from the call's argument syntax and the effect's path.
func (c *checker) logArgForCall(in ssa.CallInstruction, e *Effect) string {
	call := c.calls[in.Pos()]
	if call == nil {
		return ""
	}
	args := call.Args
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
		if selection, ok := c.pass.TypesInfo.Selections[sel]; ok && selection.Kind() == types.MethodVal {
			args = append([]ast.Expr{sel.X}, args...)
		}
	}
	if e.Param < 0 || e.Param >= len(args) || hasCall(args[e.Param]) {
		return ""
	}
	return renderSteps(types.ExprString(args[e.Param]), e.Steps)
}

// renderSteps names the location a path from base reaches, as a tx.Log
// argument; "" if an index is unknown.
func renderSteps(base string, steps []FactStep) string {
	if len(steps) == 0 {
		return base
	}
	expr := base
	for i, s := range steps {
		switch s.Kind {
		case stepField:
			expr += "." + s.Name
		case stepArr, stepElem:
			if !s.Const {
				return ""
			}
			expr += "[" + strconv.FormatInt(s.Index, 10) + "]"
		case stepLoad:
			if i == len(steps)-1 {
				return expr
			}
			if steps[i+1].Kind == stepLoad {
				expr = "(*" + expr + ")"
			}
		}
	}
	return "&" + expr
}
