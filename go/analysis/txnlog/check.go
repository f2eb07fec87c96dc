// The walk over one function: every store and call is checked against the
// logs made before it (transactional mode) or turned into a summary effect
// (summary mode). See analyzer.go for the two modes.

package txnlog

import (
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ssa"
)

func (c *checker) analyze(fi *funcInfo) {
	if fi.state != 0 {
		return
	}
	fi.state = 1
	fi.results = make([]Prov, fi.fn.Signature.Results().Len())
	for _, b := range fi.fn.Blocks {
		for _, in := range b.Instrs {
			switch in := in.(type) {
			case *ssa.Store:
				if fi.c.inVolatileObject(in.Addr) {
					continue
				}
				fi.write(in, pathOf(in.Addr), fi.get(in.Addr), fi.c.site(in.Pos(), in.Addr))
			case ssa.CallInstruction:
				fi.call(in)
			case *ssa.Return:
				for i, r := range in.Results {
					if i < len(fi.results) {
						fi.results[i] = fi.results[i].join(fi.get(r))
					}
				}
			}
		}
	}
	fi.summariseLogs()
	fi.state = 2
}

// site describes where a write happens, for messages and fixes.
type site struct {
	pos    token.Pos
	what   string // the location written, as the source says it
	logArg string // the argument of tx.Log that covers it ("" if none)
	callee string // set for writes done in a called function
	at     string // file:line of the callee's store
	eff    *Effect
}

func (fi *funcInfo) posString(pos token.Pos) string {
	p := fi.c.pass.Fset.Position(pos)
	return fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)
}

// write checks one write to location p through a pointer of provenance pr.
func (fi *funcInfo) write(at ssa.Instruction, p path, pr Prov, s site) {
	if !pr.needsLog(fi.txn) && pr.Params == 0 && pr.Flags&provUnknown == 0 {
		return
	}
	cov := no
	if p.root != nil {
		cov = fi.coverage(at, p)
	}
	if cov == yes {
		return
	}
	if fi.txn {
		switch {
		case pr.needsLog(true) && cov == no:
			fi.c.reportMissing(fi, s)
			fi.assumeLogged(at, p)
		case pr.needsLog(true):
			fi.c.report(s.pos, "cannot decide: the logged range may not cover %s%s", s.what, s.via())
			fi.assumeLogged(at, p)
		default:
			fi.c.report(s.pos, "cannot decide: %s is written%s through a pointer of unknown provenance", s.what, s.via())
		}
		return
	}
	if s.eff == nil && fi.c.isIgnored(s.pos) {
		return // an ignored store is no effect either
	}
	undecided := ""
	if cov == maybe {
		undecided = "the logged range may not cover " + s.what
	}
	if pr.Flags&provPool != 0 {
		fi.addEffect(s.effect(-1, nil, undecided, fi))
	}
	if pr.Flags&provUnknown != 0 {
		fi.addEffect(s.effect(-1, nil, s.what+" is written through a pointer of unknown provenance", fi))
	}
	for j := 0; j < 64; j++ {
		if pr.Params&(1<<uint(j)) != 0 {
			fi.addEffect(s.effect(j, fi.relSteps(p, j), undecided, fi))
		}
	}
}

// assumeLogged treats a reported location as logged from here on (as it is
// once -fix has inserted the log), so stores after it are not reported again.
func (fi *funcInfo) assumeLogged(at ssa.Instruction, p path) {
	if p.root != nil {
		fi.logs = append(fi.logs, region{at: at, obj: p, virtual: true})
	}
}

func (s site) via() string {
	if s.callee == "" {
		return ""
	}
	return fmt.Sprintf(" in call to %s (%s)", s.callee, s.at)
}

// effect turns a write into a summary effect of fi (keeping the innermost
// store's description when the write comes from a callee).
func (s site) effect(param int, steps []FactStep, undecided string, fi *funcInfo) Effect {
	e := Effect{Param: param, Steps: steps, Opaque: steps == nil, Undecided: undecided,
		What: s.what, Pos: fi.posString(s.pos), Func: fi.fn.Name()}
	if s.eff != nil {
		e.What, e.Pos, e.Func = s.eff.What, s.eff.Pos, s.eff.Func
		e.TParam, e.Member = s.eff.TParam, s.eff.Member
		if undecided == "" {
			e.Undecided = s.eff.Undecided
		}
	}
	return e
}

func (fi *funcInfo) addEffect(e Effect) {
	for _, o := range fi.effects {
		if o.Param == e.Param && o.What == e.What && o.Pos == e.Pos && o.Undecided == e.Undecided {
			return
		}
	}
	switch {
	case len(fi.effects) < maxEffects-1:
		fi.effects = append(fi.effects, e)
	case len(fi.effects) == maxEffects-1:
		// Full: one last effect stands for the rest, so nothing is lost.
		fi.effects = append(fi.effects, Effect{Param: -1, Opaque: true, Pos: e.Pos, Func: e.Func,
			Undecided: fmt.Sprintf("%s has more effects than a summary holds", fi.fn.Name())})
	}
}

// relSteps expresses p relative to parameter j (free variables follow the
// parameters), or nil if p is not rooted there.
func (fi *funcInfo) relSteps(p path, j int) []FactStep {
	var root ssa.Value
	if j < len(fi.fn.Params) {
		root = fi.fn.Params[j]
	} else if k := j - len(fi.fn.Params); k < len(fi.fn.FreeVars) {
		root = fi.fn.FreeVars[k]
	}
	if root == nil || p.root != root {
		return nil
	}
	out := []FactStep{}
	for _, s := range p.steps {
		fs := FactStep{Kind: s.kind, Field: s.field, Name: s.name}
		if k, ok := constInt(s.index); ok {
			fs.Const, fs.Index = true, k
		}
		out = append(out, fs)
	}
	return out
}

// stepsOf is the kinds of a summary's steps, as path steps.
func stepsOf(fs []FactStep) []step {
	out := make([]step, len(fs))
	for i, s := range fs {
		out[i] = step{kind: s.Kind}
	}
	return out
}

// factPath extends an argument's path by a summary's steps.
func factPath(arg ssa.Value, steps []FactStep) path {
	p := pathOf(arg)
	for _, fs := range steps {
		s := step{kind: fs.Kind, field: fs.Field, name: fs.Name}
		if fs.Const {
			s.index = ssa.NewConst(constant.MakeInt64(fs.Index), types.Typ[types.Int])
		}
		p = p.with(s)
	}
	return p
}

// call checks a call: engram API, builtins, atomics, summaries of callees
// in the module (one per member type for a method of a type parameter),
// and the calls nothing can be said about.
func (fi *funcInfo) call(in ssa.CallInstruction) {
	common := in.Common()
	if ts, unresolved, ok := fi.memberTargets(common); ok {
		for _, t := range ts {
			fi.callTarget(in, t)
		}
		for _, t := range unresolved {
			fi.undecided(in.Pos(), fi.invokeReach(in), fmt.Sprintf("call through method %s of type parameter %s = %s may store to pool memory",
				common.Method.Name(), fi.c.typeString(common.Value.Type()), fi.c.typeString(t)))
		}
		return
	}
	if common.IsInvoke() {
		reason := fmt.Sprintf("call through interface method %s may store to pool memory", common.Method.Name())
		if tp, ok := types.Unalias(common.Value.Type()).(*types.TypeParam); ok {
			reason = fmt.Sprintf("call through method %s of type parameter %s (its type set is not a finite list of types) may store to pool memory",
				common.Method.Name(), tp.Obj().Name())
		}
		fi.undecided(in.Pos(), fi.invokeReach(in), reason)
		return
	}
	if b, ok := common.Value.(*ssa.Builtin); ok {
		fi.builtin(in, b.Name(), common.Args)
		return
	}
	if engramFunc(common) != "" {
		return
	}
	callee := common.StaticCallee()
	if callee == nil && takesTx(common.Signature()) {
		// every function of the module that can be this value is checked
		// on its own: one taking the *Tx used as a value is transactional
		return
	}
	if callee == nil {
		if fn, bindings := fi.staticFunc(common.Value); fn != nil && fi.applyFunc(in, fn, append(append([]ssa.Value(nil), common.Args...), bindings...), "") {
			return
		}
		reason := fmt.Sprintf("call of a function value%s may store to pool memory", funcValueName(common.Value))
		if k := fi.funcParamIndex(common.Value); k >= 0 && !fi.txn {
			// decided at each call of fi, by the function passed there
			fi.addEffect(Effect{Param: -1, Opaque: true, Undecided: reason, Calls: k + 1,
				Pos: fi.posString(in.Pos()), Func: fi.fn.Name()})
			return
		}
		fi.undecided(in.Pos(), Prov{Flags: provUnknown}, reason)
		return
	}
	fi.callTarget(in, staticTarget(common))
}

// invokeReach is what a call through an interface (or type parameter)
// method may write: the receiver's and the arguments' memory.
func (fi *funcInfo) invokeReach(in ssa.CallInstruction) Prov {
	common := in.Common()
	pr := fi.reach(common.Value, in)
	for _, a := range common.Args {
		pr = pr.join(fi.reach(a, in))
	}
	return pr
}

// callTarget checks a call of one known function: an atomic, a function
// of the module through its summary, or one outside it.
func (fi *funcInfo) callTarget(in ssa.CallInstruction, t target) {
	obj := funcObj(t.fn)
	if obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == "sync/atomic" {
		fi.atomic(in, obj, t.args)
		return
	}
	sum := fi.c.summaryOfFunc(t.fn)
	if sum == nil {
		fi.external(in, t.fn, t.args)
		return
	}
	name := calleeName(t.fn)
	if obj != nil && obj.Pkg() != nil && obj.Pkg() != fi.c.pass.Pkg {
		name = obj.Pkg().Name() + "." + name
	}
	for _, e := range fi.targetEffects(t, sum) {
		fi.applyEffect(in, t.args, &e, name)
	}
}

// targetEffects is the callee's effects as they hold at this call (see
// bindEffect and memberEffect).
func (fi *funcInfo) targetEffects(t target, sum *Summary) []Effect {
	var out []Effect
	for _, e := range sum.Effects {
		e, ok := fi.bindEffect(e, t.fn.TypeArgs())
		if !ok {
			continue
		}
		if t.member != nil {
			e = fi.memberEffect(e, t.member)
		}
		out = append(out, e)
	}
	return out
}

// targets lists the functions a call may run, if all are known: its
// static callee, or the method of each member of a type parameter's
// finite type set.
func (fi *funcInfo) targets(common *ssa.CallCommon) []target {
	if ts, unresolved, ok := fi.memberTargets(common); ok {
		if len(unresolved) > 0 {
			return nil
		}
		return ts
	}
	if _, ok := common.Value.(*ssa.Builtin); ok || common.IsInvoke() || common.StaticCallee() == nil {
		return nil
	}
	return []target{staticTarget(common)}
}

// takesTx reports whether a signature has a *engram.Tx parameter.
func takesTx(sig *types.Signature) bool {
	for i := 0; i < sig.Params().Len(); i++ {
		if isTxPtr(sig.Params().At(i).Type()) {
			return true
		}
	}
	return false
}

// funcValueName names a called function value for messages (" f"), if it
// has a source name.
func funcValueName(v ssa.Value) string {
	switch v := v.(type) {
	case *ssa.Parameter:
		return " (" + v.Name() + ")"
	case *ssa.FreeVar:
		return " (" + v.Name() + ")"
	}
	return ""
}

func calleeName(fn *ssa.Function) string {
	if fn.Origin() != nil {
		fn = fn.Origin()
	}
	if obj, ok := fn.Object().(*types.Func); ok && fn.Synthetic != "" {
		// a bound method or thunk: name the method it wraps
		if recv := obj.Type().(*types.Signature).Recv(); recv != nil {
			t := recv.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := types.Unalias(t).(*types.Named); ok {
				return n.Obj().Name() + "." + obj.Name()
			}
		}
		return obj.Name()
	}
	if recv := fn.Signature.Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := types.Unalias(t).(*types.Named); ok {
			return n.Obj().Name() + "." + fn.Name()
		}
	}
	if fn.Parent() != nil {
		return "func literal in " + fn.Parent().Name()
	}
	return fn.Name()
}

// undecided reports (or summarises) an operation whose effect on the pool
// cannot be decided, if any memory it may touch could be pool memory.
func (fi *funcInfo) undecided(pos token.Pos, pr Prov, reason string) {
	if fi.txn {
		if pr.needsLog(true) || pr.Flags&provUnknown != 0 {
			fi.c.report(pos, "cannot decide: %s", reason)
		}
		return
	}
	fi.undecidedEffect(pr, &Effect{Undecided: reason, Pos: fi.posString(pos), Func: fi.fn.Name()})
}

// paramIndex is v's index among fi's parameters (free variables follow),
// or -1.
func (fi *funcInfo) paramIndex(v ssa.Value) int {
	for i, p := range fi.fn.Params {
		if p == v {
			return i
		}
	}
	for i, f := range fi.fn.FreeVars {
		if f == v {
			return len(fi.fn.Params) + i
		}
	}
	return -1
}

// funcParamIndex is the index of the parameter (or captured variable) a
// called function value comes from, or -1.
func (fi *funcInfo) funcParamIndex(v ssa.Value) int {
	if u, ok := v.(*ssa.UnOp); ok && u.Op == token.MUL {
		if fv, ok := u.X.(*ssa.FreeVar); ok && onlyLoaded(fv) {
			return fi.paramIndex(fv)
		}
	}
	return fi.paramIndex(v)
}

// applyCall checks a callee's call of the function value its caller passes
// in args[e.Calls-1]: a function or closure of this package is checked
// here through its summary (what it is called with is pool memory, its
// captured variables are the closure's bindings); a function value fi
// was itself given is left to fi's callers. False if it cannot say.
func (fi *funcInfo) applyCall(in ssa.CallInstruction, args []ssa.Value, e *Effect, callee string) bool {
	if e.Calls-1 >= len(args) || args[e.Calls-1] == nil {
		return false
	}
	fv := args[e.Calls-1]
	if _, ok := fv.(*ssa.Alloc); ok {
		fv = onlyStored(fv) // a captured variable: what it holds
		if fv == nil {
			return false
		}
	}
	if k := fi.paramIndex(fv); k >= 0 && !fi.txn {
		out := *e
		out.Calls = k + 1
		fi.addEffect(out)
		return true
	}
	fn, bindings := fi.staticFunc(fv)
	if fn == nil {
		return false
	}
	return fi.applyFunc(in, fn, append(make([]ssa.Value, len(fn.Params)), bindings...), callee)
}

// applyFunc checks, at in, the summary of fn (a function or closure of
// this package called through a function value) against args (nil for
// arguments not known here: pool memory). via names the callee that makes
// the call, if not in itself. False if fn has no summary here.
func (fi *funcInfo) applyFunc(in ssa.CallInstruction, fn *ssa.Function, args []ssa.Value, via string) bool {
	// (a closure inside a generic function shares its type parameters: its
	// summary is over the generic body, as the function's own is)
	if fn.Pkg != fi.c.pkg || len(fn.Blocks) == 0 || fn.TypeParams().Len() > 0 && fn.Parent() == nil {
		return false
	}
	fin := fi.c.info(fn)
	if fin.state == 1 {
		return true // recursion: optimistic, as for calls
	}
	fi.c.analyze(fin)
	name := calleeName(fn)
	if via != "" {
		name += " through " + via
	}
	for i := range fin.effects {
		fi.applyEffect(in, args, &fin.effects[i], name)
	}
	return true
}

// staticFunc is the one function a function value v can be, with the
// closure's bindings: a function, a closure made here, or a local (or a
// captured local) that only ever holds one such value. Nil otherwise.
func (fi *funcInfo) staticFunc(v ssa.Value) (*ssa.Function, []ssa.Value) {
	for depth := 0; depth < 4; depth++ {
		switch x := v.(type) {
		case *ssa.Function:
			return x, nil
		case *ssa.MakeClosure:
			fn, _ := x.Fn.(*ssa.Function)
			return fn, x.Bindings
		case *ssa.UnOp:
			if x.Op != token.MUL {
				return nil, nil
			}
			cell := x.X
			for owner := fi; ; {
				fv, ok := cell.(*ssa.FreeVar)
				if !ok {
					break
				}
				if !onlyLoaded(fv) {
					return nil, nil
				}
				if owner, cell = owner.binding(fv); owner == nil {
					return nil, nil
				}
			}
			v = onlyStored(cell)
		default:
			return nil, nil
		}
	}
	return nil, nil
}

// onlyLoaded reports whether a captured variable is only read (here, and
// in the closures it is captured by in turn).
func onlyLoaded(v ssa.Value) bool {
	if v.Referrers() == nil {
		return false
	}
	for _, r := range *v.Referrers() {
		if !readUse(r, v) {
			return false
		}
	}
	return true
}

// readUse reports whether instruction r only reads the variable v: a load,
// or a closure that captures v and only reads it.
func readUse(r ssa.Instruction, v ssa.Value) bool {
	switch r := r.(type) {
	case *ssa.UnOp, *ssa.DebugRef:
		return true
	case *ssa.MakeClosure:
		return boundOnlyLoaded(r, v)
	}
	return false
}

// boundOnlyLoaded reports whether the closure mc only reads v, which it
// captures.
func boundOnlyLoaded(mc *ssa.MakeClosure, v ssa.Value) bool {
	fn, ok := mc.Fn.(*ssa.Function)
	if !ok {
		return false
	}
	for i, b := range mc.Bindings {
		if b == v && (i >= len(fn.FreeVars) || !onlyLoaded(fn.FreeVars[i])) {
			return false
		}
	}
	return true
}

// onlyStored is the one value ever stored into a local cell (an Alloc that
// is otherwise only loaded, or captured by closures that only load it), or
// nil.
func onlyStored(cell ssa.Value) ssa.Value {
	if _, ok := cell.(*ssa.Alloc); !ok || cell.Referrers() == nil {
		return nil
	}
	var val ssa.Value
	for _, r := range *cell.Referrers() {
		if st, ok := r.(*ssa.Store); ok && st.Addr == cell && val == nil {
			val = st.Val
		} else if !readUse(r, cell) {
			return nil
		}
	}
	return val
}

// applyEffect checks one effect of a callee at the call site (args[i] nil:
// memory the callee passes, taken to be pool memory).
func (fi *funcInfo) applyEffect(in ssa.CallInstruction, args []ssa.Value, e *Effect, callee string) {
	if e.Calls > 0 && fi.applyCall(in, args, e, callee) {
		return
	}
	s := site{pos: in.Pos(), what: e.What, callee: callee, at: e.Pos, eff: e}
	var pr Prov
	var p path
	if e.Param < 0 || e.Param >= len(args) || args[e.Param] == nil {
		pr = Prov{Flags: provPool}
	} else {
		arg := args[e.Param]
		if !e.Opaque && e.Undecided == "" && inObject(stepsOf(e.Steps)) && fi.c.inVolatileObject(arg) {
			return // inside an object the pool cannot hold
		}
		pr = fi.pathProv(arg, e.Steps)
		if !e.Opaque {
			p = factPath(arg, e.Steps)
			if _, isParam := types.Unalias(arg.Type()).(*types.TypeParam); !isParam {
				// (no field of a type parameter can be named in a fix)
				s.logArg = fi.c.logArgForCall(in, e)
			}
		}
	}
	if e.Undecided != "" {
		reason := fmt.Sprintf("in call to %s: %s (%s)", callee, e.Undecided, e.Pos)
		if e.Param < 0 {
			pr = Prov{Flags: provUnknown}
		}
		if fi.txn {
			fi.undecided(in.Pos(), pr, reason)
		} else {
			fi.undecidedEffect(pr, e)
		}
		return
	}
	fi.write(in, p, pr, s)
}

// pathProv is the provenance of the memory a callee's path from arg ends
// in: each load along the path moves to what the loaded location holds.
func (fi *funcInfo) pathProv(arg ssa.Value, steps []FactStep) Prov {
	pr := fi.get(arg)
	first := true
	for _, s := range steps {
		if s.Kind != stepLoad {
			continue
		}
		next := Prov{Params: pr.Params, Flags: pr.Flags & provUnknown}
		if pr.Flags&(provPool|provFresh|provFreshExt) != 0 {
			next.Flags |= provPool
		}
		if pr.Flags&provVolatile != 0 {
			if first {
				next = next.join(fi.volatileLoad(arg))
			} else {
				next = next.join(unknown)
			}
		}
		pr, first = next, false
	}
	return pr
}

// undecidedEffect passes a callee's undecided effect up a summary.
func (fi *funcInfo) undecidedEffect(pr Prov, e *Effect) {
	out := *e
	out.Opaque, out.Steps, out.Calls = true, nil, 0
	if pr.Flags&(provPool|provUnknown) != 0 {
		out.Param = -1
		fi.addEffect(out)
	}
	for j := 0; j < 64; j++ {
		if pr.Params&(1<<uint(j)) != 0 {
			out.Param = j
			fi.addEffect(out)
		}
	}
}

// builtin: copy and clear write the elements of their first argument.
func (fi *funcInfo) builtin(in ssa.CallInstruction, name string, args []ssa.Value) {
	if (name != "copy" && name != "clear") || len(args) == 0 {
		return
	}
	dst := args[0]
	if sl, ok := dst.Type().Underlying().(*types.Slice); !ok || !fi.c.canHold(sl.Elem()) {
		return // clear of a map, or elements the pool cannot hold
	}
	s := site{pos: in.Pos(), what: fmt.Sprintf("the elements of %s", fi.c.exprText(dst, in.Pos()))}
	if fi.rangeLogged(in, dst) {
		return
	}
	base, kind := elemBase(dst)
	fi.write(in, base.with(step{kind: kind}), fi.get(dst), s)
}

// rangeLogged reports whether a LogSlice of exactly the resliced range (or
// of all of its base) dominates a copy into dst.
func (fi *funcInfo) rangeLogged(in ssa.Instruction, dst ssa.Value) bool {
	sl, ok := dst.(*ssa.Slice)
	if !ok {
		return false
	}
	want := sliceRegion(in, sl)
	for _, r := range fi.logs {
		if !r.slice || !dominates(r.at, in) || r.kind != want.kind ||
			matchPrefix(r.base, want.base) != yes || len(r.base.steps) != len(want.base.steps) {
			continue
		}
		full := isZero(r.lo) && (r.hi == nil || isLen(r.hi, r.base))
		if full || (sameIndex(r.lo, want.lo) == yes || isZero(r.lo) && isZero(want.lo)) && r.hi == want.hi {
			return true
		}
	}
	return false
}

// atomic: sync/atomic stores write the pointee of their first argument
// (or of the receiver of an atomic type's method).
func (fi *funcInfo) atomic(in ssa.CallInstruction, obj *types.Func, args []ssa.Value) {
	switch name := obj.Name(); {
	case len(args) == 0:
		return
	case hasPrefix(name, "Store", "Add", "Swap", "CompareAndSwap", "And", "Or"):
		dst := args[0]
		if fi.c.inVolatileObject(dst) {
			return
		}
		text := fi.c.exprText(dst, in.Pos())
		s := site{pos: in.Pos(), what: deref(text)}
		if !strings.ContainsAny(text, "()") {
			s.logArg = text
		}
		fi.write(in, pathOf(dst), fi.get(dst), s)
	}
}

// deref names the pointee of a pointer expression: n.Count for &n.Count.
func deref(e string) string {
	if strings.HasPrefix(e, "&") {
		return e[1:]
	}
	return "*" + e
}

func hasPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if len(s) >= len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}

// scans reports whether a function of a read-only package nevertheless
// writes through its arguments (fmt.Sscan and the like, a Read, or calls a
// function it is given: Shuffle).
func scans(name string) bool {
	return strings.Contains(strings.ToLower(name), "scan") || name == "Read" || name == "Shuffle"
}

// reach is the provenance of what the call at, given v, may write: v's
// memory, and for a local holding pointers (a variadic argument list, a
// struct of pointers) also the memory stored into it.
func (fi *funcInfo) reach(v ssa.Value, at ssa.Instruction) Prov {
	if !pointerish(v.Type()) {
		return Prov{}
	}
	p := fi.get(v)
	if p.Flags&provVolatile == 0 {
		return p
	}
	var elem types.Type
	switch t := v.Type().Underlying().(type) {
	case *types.Pointer:
		elem = t.Elem()
	case *types.Slice:
		elem = t.Elem()
	}
	if elem != nil && pointerish(elem) {
		p = p.join(fi.volatileLoadBefore(v, at))
	}
	return p
}

// readOnlyPkgs are standard packages whose functions do not store through
// the pointers passed to them (or only to lock words, which are volatile
// state by Engram's rules).
// runtime/metrics is one but for Read, which fills the []metrics.Sample it
// is given (not exempt, as no Read is: see scans).
var readOnlyPkgs = map[string]bool{
	"fmt": true, "errors": true, "strings": true, "strconv": true, "math": true,
	"math/bits": true, "unicode": true, "log": true, "time": true,
	"context": true, "sync": true, "runtime": true, "testing": true,
	"runtime/metrics": true,
	// the generators' methods write their own state (a Rand holds an
	// interface: never pool memory); Read and Shuffle are not exempt
	"math/rand": true, "math/rand/v2": true,
}

// readOnlyFuncPkgs are standard packages whose functions (not methods:
// bytes.Buffer and bytes.Reader write through theirs) do not store through
// their arguments, unless given a function to call.
var readOnlyFuncPkgs = map[string]bool{"bytes": true}

// readOnlyFunc reports whether fn is a function of readOnlyFuncPkgs that
// takes no function argument.
func readOnlyFunc(fn *ssa.Function) bool {
	if fn.Pkg == nil || !readOnlyFuncPkgs[fn.Pkg.Pkg.Path()] || fn.Signature.Recv() != nil {
		return false
	}
	for i := 0; i < fn.Signature.Params().Len(); i++ {
		if _, ok := fn.Signature.Params().At(i).Type().Underlying().(*types.Signature); ok {
			return false
		}
	}
	return true
}

// external: a call with no summary (outside the module) that is passed
// memory which may be pool memory cannot be decided.
func (fi *funcInfo) external(in ssa.CallInstruction, callee *ssa.Function, args []ssa.Value) {
	if callee.Pkg != nil && readOnlyPkgs[callee.Pkg.Pkg.Path()] && !scans(callee.Name()) || readOnlyFunc(callee) {
		return
	}
	if callee.Synthetic != "" {
		// a wrapper (bound method, thunk): judge by its target
		if obj, ok := callee.Object().(*types.Func); ok && obj.Pkg() != nil &&
			readOnlyPkgs[obj.Pkg().Path()] && !scans(obj.Name()) {
			return
		}
	}
	var pr Prov
	for _, a := range args {
		pr = pr.join(fi.reach(a, in))
	}
	fi.undecided(in.Pos(), pr, fmt.Sprintf("call to %s outside the module may store to pool memory passed to it", callee.String()))
}

// report emits one diagnostic per position and message.
func (c *checker) report(pos token.Pos, format string, args ...any) {
	c.reportFix(pos, nil, format, args...)
}

func (c *checker) reportFix(pos token.Pos, fixes []analysis.SuggestedFix, format string, args ...any) {
	if c.testsOnly && !strings.HasSuffix(c.pass.Fset.Position(pos).Filename, "_test.go") || c.isIgnored(pos) {
		return
	}
	msg := fmt.Sprintf(format, args...)
	key := fmt.Sprintf("%d %s", pos, msg)
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	c.pass.Report(analysis.Diagnostic{Pos: pos, Message: msg, SuggestedFixes: fixes})
}
