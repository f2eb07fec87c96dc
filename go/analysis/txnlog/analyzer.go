// The txnlog analyzer: unlogged stores to pool memory inside Engram
// transactions (go-pmem's compiler pass, as a vet check). See doc.go for the
// rules it applies.
//
// Each function of the package is analyzed once, in one of two modes:
//   - transactional (it takes a *engram.Tx and is exported, a method or used
//     as a value; or is a closure inside such a function whose value
//     escapes): every store to memory that may live in the pool must be
//     preceded on every path by a log covering it; the analyzer reports the
//     ones that are not, and "cannot decide" where it cannot tell;
//   - summary (every other function, including unexported helpers taking
//     the *Tx that are only called directly): its unlogged stores to memory
//     reached from its parameters become a Summary fact, checked at each
//     call site inside a transaction, where the arguments' provenance and
//     the caller's logs are known.
//
// The analysis never fails: anything it cannot model becomes "unknown" and,
// where it matters, a "cannot decide" diagnostic.

package txnlog

import (
	"go/ast"
	"go/build"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/buildssa"
	"golang.org/x/tools/go/ssa"
)

// Analyzer reports unlogged stores to pool memory inside transactions.
var Analyzer = &analysis.Analyzer{
	Name:      "txnlog",
	Doc:       "report stores inside Engram transactions to pool memory that is not undo-logged first\n\nInside pool.Txn closures and functions taking a *engram.Tx, every store to memory that may live in the pool (reached from engram.Root, from a parameter, or loaded from such memory) must be preceded on every path by tx.Log or engram.LogSlice covering it. Stores in called functions of the same module are checked at the call through summaries (a method of a type parameter with a finite type set, once per member type). Where this cannot be decided statically the analyzer says \"cannot decide\". With -fix it inserts the missing tx.Log calls.",
	Requires:  []*analysis.Analyzer{buildssa.Analyzer},
	Run:       run,
	FactTypes: []analysis.Fact{new(Summary), new(VolatileType)},
}

type checker struct {
	pass    *analysis.Pass
	pkg     *ssa.Package
	infos   map[*ssa.Function]*funcInfo
	seen    map[string]bool             // reported position+message
	exprs   map[token.Pos]ast.Expr      // written expressions by SSA position
	calls   map[token.Pos]*ast.CallExpr // calls by Lparen
	modPath string
	std     map[string]bool // package path -> in the standard library
	// testsOnly: report only in _test.go files (the engram package itself)
	testsOnly bool
	ignored   map[string]bool // "file:line" of //engramvet:ignore comments
	globals   map[*ssa.Global]Prov
	allFuncs  []*ssa.Function // source functions and the package initializer
	// direct[fn]: fn is referred to only as the callee of static calls in
	// this package, at least once (see helperTx).
	direct map[*ssa.Function]bool
	allocs map[*types.TypeName]bool // see allocatable (nil until asked)
	// volatile: this package's types marked //engramvet:volatile
	volatile map[*types.TypeName]bool
}

// funcInfo is the state of one function's analysis.
type funcInfo struct {
	c          *checker
	fn         *ssa.Function
	txn        bool
	tx         string // name of the *Tx in scope, for fixes ("" if none)
	prov       map[ssa.Value]Prov
	logs       []region
	batched    []batchAdd  // ranges added to log batches (see flushBatches)
	stores     []storeAt   // every plain store, for killing logs (see killed)
	callStores []callStore // stores callees make through arguments, likewise
	state      int         // 0 new, 1 analyzing, 2 done
	// computing: the provenance fixpoint is running (its results are partial)
	computing bool
	effects   []Effect
	logged    []Effect // what fi logs on every path, for its summary
	results   []Prov
}

func (fi *funcInfo) summary() *Summary {
	return &Summary{Effects: fi.effects, Logs: fi.logged, Results: fi.results}
}

func run(pass *analysis.Pass) (any, error) {
	// The standard library is never inside a transaction.
	if len(pass.Files) == 0 || inGOROOT(pass) {
		return nil, nil
	}
	ssaInfo := pass.ResultOf[buildssa.Analyzer].(*buildssa.SSA)
	c := &checker{pass: pass, pkg: ssaInfo.Pkg, infos: map[*ssa.Function]*funcInfo{}, seen: map[string]bool{}, std: map[string]bool{}}
	if pass.Module != nil {
		c.modPath = pass.Module.Path
	}
	// The engram package implements the logging the analyzer checks for:
	// only its tests are held to the rules.
	c.testsOnly = pass.Pkg.Path() == engramPath
	c.indexExprs()
	c.markVolatile()
	c.countRefs(ssaInfo.SrcFuncs)
	c.globals = map[*ssa.Global]Prov{}
	c.allFuncs = append([]*ssa.Function(nil), ssaInfo.SrcFuncs...)
	if init := c.pkg.Func("init"); init != nil {
		c.allFuncs = append(c.allFuncs, init)
	}
	c.checkVolatileAllocs()
	for _, fn := range ssaInfo.SrcFuncs {
		c.analyze(c.info(fn))
	}
	// closures in package-level variable initializers (not in SrcFuncs)
	if init := c.pkg.Func("init"); init != nil {
		var anons func(fn *ssa.Function)
		anons = func(fn *ssa.Function) {
			for _, a := range fn.AnonFuncs {
				c.analyze(c.info(a))
				anons(a)
			}
		}
		anons(init)
	}
	for _, fn := range ssaInfo.SrcFuncs {
		if obj, ok := fn.Object().(*types.Func); ok && fn.Parent() == nil {
			fi := c.info(fn)
			if sum := fi.summary(); !sum.empty() {
				pass.ExportObjectFact(obj, sum)
			}
		}
	}
	return nil, nil
}

// inGOROOT reports whether the package is part of the standard library,
// which is never inside a transaction and gets no summaries.
func inGOROOT(pass *analysis.Pass) bool {
	return underGOROOT(pass.Fset.File(pass.Files[0].Pos()).Name())
}

// info returns fn's state, deciding its mode and computing provenance.
func (c *checker) info(fn *ssa.Function) *funcInfo {
	if fi, ok := c.infos[fn]; ok {
		return fi
	}
	// state 1 while provenance is computed: a recursive call back into fn
	// sees an optimistic empty summary.
	fi := &funcInfo{c: c, fn: fn, state: 1}
	c.infos[fn] = fi
	var parent *funcInfo
	if fn.Parent() != nil {
		parent = c.info(fn.Parent())
	}
	if p := txParam(fn); p != nil {
		fi.txn, fi.tx = !c.helperTx(fn), p.Name()
	} else if parent != nil && parent.txn && !onlyCalled(fn) {
		fi.txn, fi.tx = true, capturedTx(fn)
	}
	if fi.tx == "_" {
		fi.tx = ""
	}
	fi.computeProv()
	fi.collectLogs()
	fi.state = 0
	return fi
}

// helperTx reports whether a function taking a *Tx is a helper checked at
// its calls rather than on its own: unexported, not a method (a method may
// be reached through an interface), and only ever called directly in this
// package. Its parameters are then whatever its callers pass (a freshly
// allocated object needs no log), instead of pool memory.
func (c *checker) helperTx(fn *ssa.Function) bool {
	obj, ok := fn.Object().(*types.Func)
	if !ok || obj.Exported() || fn.Signature.Recv() != nil || fn.Parent() != nil {
		return false
	}
	return c.direct[fn]
}

// countRefs fills c.direct from every instruction of the package
// (including the package initializer, where variables may take functions).
func (c *checker) countRefs(funcs []*ssa.Function) {
	c.direct = map[*ssa.Function]bool{}
	escaped := map[*ssa.Function]bool{}
	if init := c.pkg.Func("init"); init != nil {
		funcs = append(funcs, init)
	}
	for _, f := range funcs {
		for _, b := range f.Blocks {
			for _, in := range b.Instrs {
				call, isCall := in.(ssa.CallInstruction)
				for i, op := range in.Operands(nil) {
					g, ok := (*op).(*ssa.Function)
					if !ok || g.Parent() != nil {
						continue
					}
					if isCall && i == 0 && call.Common().Value == g && !call.Common().IsInvoke() {
						c.direct[g] = true
					} else {
						escaped[g] = true
					}
				}
			}
		}
	}
	for g := range escaped {
		delete(c.direct, g)
	}
}

// onlyCalled reports whether a closure's value is only ever called
// directly (then it is summarised, not checked on its own).
func onlyCalled(fn *ssa.Function) bool {
	var val ssa.Value = fn
	if fn.Referrers() != nil {
		for _, r := range *fn.Referrers() {
			if mc, ok := r.(*ssa.MakeClosure); ok && mc.Fn == fn {
				val = mc
			}
		}
	}
	refs := val.Referrers()
	if refs == nil {
		return false
	}
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.DebugRef:
		case ssa.CallInstruction:
			c := r.Common()
			if c.Value != val {
				return false
			}
			for _, a := range c.Args {
				if a == val {
					return false
				}
			}
		case *ssa.MakeClosure:
			if r.Fn == val {
				continue
			}
			return false
		default:
			return false
		}
	}
	return true
}

// capturedTx names a *Tx the closure captures, for fixes.
func capturedTx(fn *ssa.Function) string {
	for _, fv := range fn.FreeVars {
		t := fv.Type()
		if p, ok := t.Underlying().(*types.Pointer); ok && isTxPtr(p.Elem()) {
			t = p.Elem()
		}
		if isTxPtr(t) {
			return fv.Name()
		}
	}
	return ""
}

// summaryOfFunc returns the summary of fn, if it is in this module:
// computed here for this package, imported as a fact otherwise. Nil when
// there is none (outside the module).
func (c *checker) summaryOfFunc(fn *ssa.Function) *Summary {
	if fn.Origin() != nil {
		fn = fn.Origin()
	}
	obj, _ := fn.Object().(*types.Func)
	// Functions of this package, and wrappers (bound methods, thunks) whose
	// bodies call the real method, are analyzed here.
	if len(fn.Blocks) > 0 && (fn.Pkg == c.pkg || fn.Synthetic != "") {
		fi := c.info(fn)
		if fi.state == 1 {
			return &Summary{} // recursion: optimistic
		}
		c.analyze(fi)
		return fi.summary()
	}
	if obj == nil || obj.Pkg() == nil || !c.sameModule(obj) {
		return nil
	}
	var sum Summary
	if c.pass.ImportObjectFact(obj.Origin(), &sum) {
		return &sum
	}
	// Every package of the module was analyzed before this one (vet runs
	// dependencies first); no fact means nothing to say.
	return &Summary{}
}

// sameModule reports whether a package path is in the module being checked
// (when the driver does not say: every package outside GOROOT).
func (c *checker) sameModule(obj types.Object) bool {
	pkgPath := obj.Pkg().Path()
	if c.modPath != "" {
		return pkgPath == c.modPath || strings.HasPrefix(pkgPath, c.modPath+"/")
	}
	if std, ok := c.std[pkgPath]; ok {
		return !std
	}
	file := c.pass.Fset.Position(obj.Pos()).Filename
	std := file == "" || underGOROOT(file) || !strings.Contains(pkgPath, ".") && isStdPath(pkgPath)
	c.std[pkgPath] = std
	return !std
}

// isStdPath asks go/build whether an import path is a standard package.
func isStdPath(path string) bool {
	p, err := build.Default.Import(path, "", build.FindOnly)
	return err == nil && p.Goroot
}

func underGOROOT(file string) bool {
	root := build.Default.GOROOT
	return root != "" && strings.HasPrefix(filepath.Clean(file), filepath.Clean(root)+string(filepath.Separator))
}
