// Logs: which log calls (and logging callees) a function makes, what each
// covers, and whether the logs before a store cover it on every path.
//
// A log covers from the point it runs until a store may overwrite a pointer
// or slice header its path goes through; coverage is "yes" when on every
// path from the entry a covering log runs first (a dominating log is the
// fast case), "maybe" when a dominating log might cover it (an index the
// analyzer cannot compare), "no" otherwise.

package txnlog

import (
	"fmt"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// collectLogs records the region every log call in fi covers.
func (fi *funcInfo) collectLogs() {
	var flushes []batchFlush
	for _, b := range fi.fn.Blocks {
		for _, in := range b.Instrs {
			call, ok := in.(ssa.CallInstruction)
			if !ok {
				continue
			}
			common := call.Common()
			switch engramFunc(common) {
			case "":
				fi.calleeLogs(in, common)
				fi.calleeStores(in, common)
			case "Tx.Log":
				if len(common.Args) == 2 {
					fi.addLog(in, stripIface(common.Args[1]))
				}
			case "LogSlice":
				if len(common.Args) == 2 {
					fi.logs = append(fi.logs, sliceRegion(in, common.Args[1]))
				}
			case "BatchLog", "BatchLogSlice":
				if len(common.Args) == 3 {
					r := sliceRegion(in, common.Args[2])
					if engramFunc(common) == "BatchLog" {
						r = region{at: in, obj: pathOf(common.Args[2])}
					}
					fi.batched = append(fi.batched, batchAdd{batch: pathOf(common.Args[1]), r: r})
				}
			case "Tx.LogBatch":
				if len(common.Args) == 2 {
					flushes = append(flushes, batchFlush{at: in, batch: pathOf(common.Args[1])})
				}
			}
		}
	}
	fi.flushBatches(flushes)
}

// batchAdd is a range added to a LogBatch (BatchLog, BatchLogSlice, or a
// helper that adds to a batch it is given): logged only when the batch is.
type batchAdd struct {
	batch path
	r     region // what it covers once logged; r.at is where it was added
}

type batchFlush struct {
	at    ssa.Instruction
	batch path
}

// flushBatches turns the ranges added to a batch into logs made where
// tx.LogBatch logs that batch: a range counts if its addition dominates the
// LogBatch call (it is in the batch on every path there). It covers from
// the LogBatch call on, and is killed by stores from its addition on (the
// batch holds the address it had then).
func (fi *funcInfo) flushBatches(flushes []batchFlush) {
	for _, f := range flushes {
		for _, a := range fi.batched {
			if !sameLocation(a.batch, f.batch) || !dominates(a.r.at, f.at) {
				continue
			}
			r := a.r
			r.from, r.at = r.at, f.at
			fi.logs = append(fi.logs, r)
		}
	}
}

// sameLocation reports whether two paths surely name the same location.
func sameLocation(a, b path) bool {
	return len(a.steps) == len(b.steps) && matchPrefix(a, b) == yes
}

// calleeLogs adds the logs a callee makes on every path (a logging helper
// such as logNode(tx, n)) as logs made at the call; for a method of a type
// parameter, the logs every member's method makes.
func (fi *funcInfo) calleeLogs(in ssa.Instruction, common *ssa.CallCommon) {
	ts := fi.targets(common)
	if len(ts) == 0 {
		return
	}
	var logs []Effect
	for i, t := range ts {
		sum := fi.c.summaryOfFunc(t.fn)
		if sum == nil {
			return
		}
		if i == 0 {
			logs = sum.Logs
		} else {
			logs = commonLogs(logs, sum.Logs)
		}
	}
	args := ts[0].args
	for _, e := range logs {
		if e.Param < 0 || e.Param >= len(args) {
			continue
		}
		p := factPath(args[e.Param], e.Steps)
		if e.Batch > 0 {
			// a helper adding to a batch it is given (checked when logged)
			if e.Batch <= len(args) {
				r := region{at: in, obj: p}
				if e.SliceAll {
					r = region{at: in, slice: true, base: p, kind: stepElem}
				}
				fi.batched = append(fi.batched, batchAdd{batch: pathOf(args[e.Batch-1]), r: r})
			}
			continue
		}
		if e.SliceAll {
			fi.logs = append(fi.logs, region{at: in, slice: true, base: p, kind: stepElem})
		} else {
			fi.logs = append(fi.logs, region{at: in, obj: p})
		}
	}
}

// commonLogs is the logs of a that b makes too.
func commonLogs(a, b []Effect) []Effect {
	var out []Effect
	for _, x := range a {
		for _, y := range b {
			if sameLog(x, y) {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

func sameLog(x, y Effect) bool {
	return x.Param == y.Param && x.SliceAll == y.SliceAll && x.Batch == y.Batch && fmt.Sprint(x.Steps) == fmt.Sprint(y.Steps)
}

// summariseLogs records the logs of parameter memory that dominate every
// return of fi.
func (fi *funcInfo) summariseLogs() {
	var rets []ssa.Instruction
	for _, b := range fi.fn.Blocks {
		if n := len(b.Instrs); n > 0 {
			if r, ok := b.Instrs[n-1].(*ssa.Return); ok {
				rets = append(rets, r)
			}
		}
	}
	if len(rets) == 0 {
		return
	}
	for _, r := range fi.logs {
		if !r.virtual && dominatesAll(r.at, rets) && !fi.killedAtAny(r, rets) {
			fi.summariseLog(r, 0)
		}
	}
	// ranges added on every path to a batch the caller passed in
	for _, a := range fi.batched {
		if len(a.batch.steps) != 0 || !dominatesAll(a.r.at, rets) || fi.killedAtAny(a.r, rets) {
			continue
		}
		for k, prm := range fi.fn.Params {
			if prm == a.batch.root {
				fi.summariseLog(a.r, k+1)
			}
		}
	}
}

// summariseLog adds what r logs of parameter memory to fi's summary (to
// the batch of parameter batch-1 if batch > 0).
func (fi *funcInfo) summariseLog(r region, batch int) {
	p := r.obj
	if r.slice {
		if r.kind != stepElem || !isZero(r.lo) || (r.hi != nil && !isLen(r.hi, r.base)) {
			return
		}
		p = r.base
	}
	for j := range len(fi.fn.Params) + len(fi.fn.FreeVars) {
		if steps := fi.relSteps(p, j); steps != nil && len(fi.logged) < maxEffects {
			fi.addLogged(Effect{Param: j, Steps: steps, SliceAll: r.slice, Batch: batch})
		}
	}
}

func (fi *funcInfo) addLogged(e Effect) {
	for _, o := range fi.logged {
		if sameLog(o, e) {
			return
		}
	}
	fi.logged = append(fi.logged, e)
}

func (fi *funcInfo) killedAtAny(r region, rets []ssa.Instruction) bool {
	for _, ret := range rets {
		if fi.killed(r, ret) {
			return true
		}
	}
	return false
}

func dominatesAll(a ssa.Instruction, bs []ssa.Instruction) bool {
	for _, b := range bs {
		if !dominates(a, b) {
			return false
		}
	}
	return true
}

func stripIface(v ssa.Value) ssa.Value {
	if mi, ok := v.(*ssa.MakeInterface); ok {
		return mi.X
	}
	return v
}

func (fi *funcInfo) addLog(at ssa.Instruction, p ssa.Value) {
	switch p.Type().Underlying().(type) {
	case *types.Pointer:
		fi.logs = append(fi.logs, region{at: at, obj: pathOf(p)})
	case *types.Slice:
		fi.logs = append(fi.logs, sliceRegion(at, p))
	}
}

// sliceRegion is the region LogSlice(tx, s) covers.
func sliceRegion(at ssa.Instruction, s ssa.Value) region {
	if sl, ok := s.(*ssa.Slice); ok {
		if _, isPtr := sl.X.Type().Underlying().(*types.Pointer); isPtr {
			return region{at: at, slice: true, base: pathOf(sl.X), kind: stepArr, lo: sl.Low, hi: sl.High}
		}
		base, kind := elemBase(sl.X)
		if kind == stepElem || isZero(sl.Low) {
			return region{at: at, slice: true, base: base, kind: kind, lo: sl.Low, hi: sl.High}
		}
	}
	return region{at: at, slice: true, base: pathOf(s), kind: stepElem}
}

// coverage decides whether the logs before at cover a store to p: yes if
// one dominating log covers it, or if on every path from the entry some
// log covers it (a log on each branch); maybe when a log might cover it.
func (fi *funcInfo) coverage(at ssa.Instruction, p path) tri {
	best := no
	for _, r := range fi.logs {
		if !dominates(r.at, at) || fi.killed(r, at) {
			continue
		}
		best = max(best, r.covers(p, at))
	}
	if best != yes && fi.everyPath(at, p) {
		return yes
	}
	return best
}

// everyPath is a must-dataflow over the blocks: covered at the end of a
// block if a log in it covers p, or if covered at the end of every
// predecessor (the entry block has none and starts uncovered).
func (fi *funcInfo) everyPath(at ssa.Instruction, p path) bool {
	gen := map[*ssa.BasicBlock]bool{}
	var genAt bool // a covering log in at's block before at
	for _, r := range fi.logs {
		if r.covers(p, at) != yes || fi.killed(r, at) {
			continue
		}
		gen[r.at.Block()] = true
		if r.at.Block() == at.Block() && index(r.at) < index(at) {
			genAt = true
		}
	}
	if genAt {
		return true
	}
	if len(gen) == 0 {
		return false
	}
	blocks := fi.fn.Blocks
	out := make(map[*ssa.BasicBlock]bool, len(blocks))
	for _, b := range blocks {
		out[b] = true
	}
	in := func(b *ssa.BasicBlock) bool {
		if b.Index == 0 || len(b.Preds) == 0 {
			return false
		}
		for _, pr := range b.Preds {
			if !out[pr] {
				return false
			}
		}
		return true
	}
	for changed := true; changed; {
		changed = false
		for _, b := range blocks {
			v := gen[b] || in(b)
			if v != out[b] {
				out[b], changed = v, true
			}
		}
	}
	return in(at.Block())
}

type storeAt struct {
	at   *ssa.Store
	path path
}

// callStore is a store a callee makes through an argument (from its
// summary): to path, or anywhere below path when opaque.
type callStore struct {
	at     ssa.Instruction
	path   path
	opaque bool
}

// calleeStores records the stores a callee's summary says it makes through
// its arguments (every member's, for a method of a type parameter), for
// the kill rule.
func (fi *funcInfo) calleeStores(in ssa.Instruction, common *ssa.CallCommon) {
	for _, t := range fi.targets(common) {
		sum := fi.c.summaryOfFunc(t.fn)
		if sum == nil {
			continue
		}
		for _, e := range fi.targetEffects(t, sum) {
			if e.Param < 0 || e.Param >= len(t.args) || e.Undecided != "" {
				continue
			}
			if e.Opaque {
				fi.callStores = append(fi.callStores, callStore{in, pathOf(t.args[e.Param]), true})
			} else {
				fi.callStores = append(fi.callStores, callStore{in, factPath(t.args[e.Param], e.Steps), false})
			}
		}
	}
}

// killed reports whether a log no longer covers what it covered when it
// ran: its path goes through a pointer (or slice header) that a store may
// overwrite between the log and at (tx.Log(&l.Head.Val); l.Head = m;
// l.Head.Val = 1 writes m's Val, which was never logged).
func (fi *funcInfo) killed(r region, at ssa.Instruction) bool {
	from := r.at
	if r.from != nil {
		from = r.from
	}
	p := r.obj
	if r.slice {
		p = r.base
	}
	for i, s := range p.steps {
		if s.kind != stepLoad {
			continue
		}
		loc := path{p.root, p.steps[:i]}
		for _, w := range fi.stores {
			if len(w.path.steps) != i || matchPrefix(loc, w.path) == no {
				continue
			}
			if between(w.at, from, at) {
				return true
			}
		}
		for _, w := range fi.callStores {
			hit := len(w.path.steps) == i && matchPrefix(loc, w.path) != no
			if w.opaque {
				hit = len(w.path.steps) <= i && matchPrefix(w.path, loc) != no
			}
			if hit && between(w.at, from, at) {
				return true
			}
		}
	}
	return false
}

// between reports whether w may run after the log at logAt and before at.
func between(w, logAt, at ssa.Instruction) bool {
	return w != logAt && !dominates(w, logAt) && reaches(logAt, w) && reaches(w, at)
}

// reaches reports whether b can run after a.
func reaches(a, b ssa.Instruction) bool {
	if a.Block() == b.Block() && index(a) < index(b) {
		return true
	}
	seen := map[*ssa.BasicBlock]bool{}
	work := append([]*ssa.BasicBlock(nil), a.Block().Succs...)
	for len(work) > 0 {
		blk := work[len(work)-1]
		work = work[:len(work)-1]
		if seen[blk] {
			continue
		}
		seen[blk] = true
		if blk == b.Block() {
			return true
		}
		work = append(work, blk.Succs...)
	}
	return false
}

func index(in ssa.Instruction) int {
	for i, x := range in.Block().Instrs {
		if x == in {
			return i
		}
	}
	return -1
}
