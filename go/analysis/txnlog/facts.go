// Function summaries: what a function does to memory reachable from its
// parameters, exported as analysis facts so that callers in other packages
// of the module can be checked.
//
// Invariant: a summary only over-approximates. An Effect with a Param is a
// store (or an undecidable operation) on memory reachable from that
// parameter that the function itself does not log first; Param -1 is one on
// memory that is pool memory whatever the arguments are.

package txnlog

import (
	"fmt"
	"strings"
)

// provenance flags: where memory may live.
const (
	provVolatile uint8 = 1 << iota // Go stack or heap, not escaped into the pool
	provFresh                      // allocated in the pool by this transaction
	provPool                       // may live in the pool and predate the transaction
	provUnknown                    // cannot tell
	provFreshExt                   // allocated in this transaction by a callee (its fields unknown here)
)

// Prov is the provenance of a value: flags, and the parameters (free
// variables follow the parameters) it may be reached from.
type Prov struct {
	Flags  uint8
	Params uint64
}

func (p Prov) join(q Prov) Prov { return Prov{p.Flags | q.Flags, p.Params | q.Params} }

// lift is the provenance of a value crossing into another function without
// a summary (captured variables): parameter bits become "pool", and so does
// fresh memory (allocated in another transaction, or at another time).
func (p Prov) lift() Prov {
	out := Prov{Flags: p.Flags}
	if p.Params != 0 || p.Flags&(provFresh|provFreshExt) != 0 {
		out.Flags |= provPool
	}
	out.Flags &^= provFresh | provFreshExt
	return out
}

// needsLog reports whether a write through a pointer of this provenance
// writes memory that must be logged (txn says parameters are pool memory).
func (p Prov) needsLog(txn bool) bool {
	return p.Flags&provPool != 0 || (txn && p.Params != 0)
}

// Step kinds of an access path.
const (
	stepField = iota // a field of the addressed struct (same object)
	stepArr          // an element of the addressed array (same object)
	stepLoad         // the pointer or slice stored at the address
	stepElem         // an element of a slice value (its backing array)
)

// FactStep is one step of an access path in a summary.
type FactStep struct {
	Kind  int
	Field int
	Name  string // field name, for messages and fixes
	Const bool   // Index is known
	Index int64
}

// Effect is one unlogged store (or undecidable operation) of a function.
type Effect struct {
	Param     int        // parameter index (free variables follow), or -1
	Steps     []FactStep // path from the parameter; nil with Opaque
	Opaque    bool       // reached from Param by a path we do not track
	Undecided string     // non-empty: a "cannot decide" reason instead of a store
	What      string     // the source expression written
	Pos       string     // file:line of the store
	Func      string     // the function that stores
	SliceAll  bool       // in Logs: all elements of the slice at Steps
	// Calls, in Effects: k > 0 for a call of the function value in
	// parameter k-1 (Undecided says so): checked at each call site
	// against the function passed there (applyCall)
	Calls int
	// Batch, in Logs: 0 for a log; k > 0 for a range added to the
	// LogBatch that parameter k-1 points to (logged when that batch is)
	Batch int
	// TParam, in Effects: k > 0 for an effect of a method called on the
	// function's type parameter k-1 that holds only when that parameter
	// is the type Member (a types.TypeString); see typeparam.go
	TParam int
	Member string
}

// Summary is the fact exported for every function of a package.
type Summary struct {
	Effects []Effect
	Logs    []Effect // parameter memory logged on every path to a return
	Results []Prov   // provenance of each result
}

func (*Summary) AFact() {}

func (s *Summary) String() string {
	var b strings.Builder
	for _, e := range s.Effects {
		if e.Undecided != "" {
			fmt.Fprintf(&b, "undecided(%d:%s) ", e.Param, e.Undecided)
		} else {
			fmt.Fprintf(&b, "store(%d:%s) ", e.Param, e.What)
		}
	}
	for _, e := range s.Logs {
		if e.Batch > 0 {
			fmt.Fprintf(&b, "batches(%d:%d steps into %d) ", e.Param, len(e.Steps), e.Batch-1)
			continue
		}
		fmt.Fprintf(&b, "logs(%d:%d steps) ", e.Param, len(e.Steps))
	}
	for i, r := range s.Results {
		if r != volatile && r != (Prov{}) {
			fmt.Fprintf(&b, "result(%d:%s) ", i, r)
		}
	}
	return strings.TrimSpace(b.String())
}

// empty reports whether the summary says nothing a caller could use.
func (s *Summary) empty() bool {
	for _, r := range s.Results {
		if r != volatile && r != (Prov{}) {
			return false
		}
	}
	return len(s.Effects) == 0 && len(s.Logs) == 0
}

func (p Prov) String() string {
	var parts []string
	for i, n := range []string{"volatile", "fresh", "pool", "unknown", "fresh-ext"} {
		if p.Flags&(1<<uint(i)) != 0 {
			parts = append(parts, n)
		}
	}
	for j := 0; j < 64; j++ {
		if p.Params&(1<<uint(j)) != 0 {
			parts = append(parts, fmt.Sprintf("p%d", j))
		}
	}
	return strings.Join(parts, "|")
}

// maxEffects bounds a summary; the last slot becomes a "cannot decide"
// effect standing for the rest.
const maxEffects = 16
