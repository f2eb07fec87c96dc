// Package txnlog is the engramvet analyzer: it reports stores inside Engram
// transactions to memory that may live in the pool and is not undo-logged
// before the store. It replaces go-pmem's compiler pass, which inserted the
// logging itself, with a check on the stock toolchain
// (golang.org/x/tools/go/analysis, so it runs under go vet -vettool).
//
// # Inside a transaction
//
// The body of a closure passed to (*engram.Pool).Txn, and every function or
// method with a *engram.Tx parameter, runs inside a transaction. Exported
// functions, methods and functions used as values are checked on their own,
// their pointer parameters taken to be pool memory; unexported functions
// only ever called directly, and functions without a *Tx, are checked where
// a transaction calls them (below), against the actual arguments.
//
// # Where memory may live
//
// Each pointer, slice or interface value gets a provenance:
//   - pool: returned by engram.Root; a pointer parameter of a *Tx function
//     (or of the function that opens the transaction, for values its closure
//     captures, and memory fresh in an earlier transaction); anything
//     loaded out of pool memory, or out of fresh memory allocated by a
//     callee or handed to code the analysis does not follow;
//   - fresh: returned by engram.New, Make, String or Bytes in this
//     transaction; needs no log (go-pmem's rule for objects allocated in
//     the same transaction); a field of memory the function allocated holds
//     what the function stored there;
//   - volatile: new(T), &T{}, make, Go globals and locals; a value loaded
//     from a local, or from an unexported global, is whatever the function
//     (the package) stored into it;
//   - unknown: loaded from an exported global, a map or a channel, returned
//     by a function outside the module, converted from an integer
//     (a pointer converted through unsafe.Pointer, and unsafe.Slice,
//     SliceData, String, StringData and Add, keep their argument's).
//
// Whatever a pointer's provenance, an object the pool cannot hold needs no
// log (poolable.go, volatile.go): a type with a map, chan, func, interface
// or unsafe.Pointer in it (the engram package refuses to allocate it), an
// unexported type its package never allocates, and a type declared
// //engramvet:volatile (checked at every instantiation that may allocate
// it).
//
// A store through pool memory needs a log; through unknown memory the
// analyzer reports "cannot decide"; through fresh or volatile memory it says
// nothing.
//
// # What a log covers
//
// tx.Log(p) covers the object *p: tx.Log(&n.Next) the field, tx.Log(n) all
// of *n, including its fields and the elements of arrays inside it (not what
// its pointers and slices point to). engram.LogSlice(tx, s[i:j]) covers the
// elements i..j-1 of s; the analyzer decides whether an index is in range
// for constants, for s[i:i+1] against index i, for the counted loop
// for k := i; k < j; k++, and for the whole slice;
// otherwise it says "cannot decide". A range added to a log batch
// (BatchLog, BatchLogSlice) is logged where tx.LogBatch logs the batch, if
// its addition dominates that call. A log covers a store only if one runs
// before it on every path (a dominating log, or one on each branch), and
// only until a store may
// overwrite a pointer or slice header the logged path was reached through.
// Locations are compared by access path (root value, fields, indexes,
// loads): logging through one alias does not cover a store through another.
//
// # Calls
//
// Every function of the module gets a summary, exported as a fact so other
// packages see it: the stores to memory reachable from its parameters (and
// closures' captured variables) that it does not log itself, the pool
// memory it writes whatever its arguments, the operations it cannot decide,
// what it logs on every path, and where its results come from. At a call
// inside a transaction each effect is checked against the caller's
// arguments and logs, exactly as a store there would be. A call of a
// function value is checked through the summary of the one function it can
// be (a closure held by a local, or passed to a helper that calls it); one
// taking the *Tx needs no check (every such function used as a value is
// checked on its own). Interface method calls and calls of other function
// values given (or able to reach) pool memory, and calls to functions
// outside the module given pool memory, are "cannot decide"; a few
// standard packages known not to write through their arguments (fmt,
// strings, errors, bytes' functions, ...) are exempt.
//
// # Type parameters
//
// A generic function is analyzed once, over its generic body. A method
// call on a value whose type is a type parameter (d.m() with d of type
// D) is checked once per member of D's type set when that set is a finite
// list of types (typeparam.go): a constraint embedding a union of types,
// or of ~*T terms (a defined type over a pointer has no methods, so *T is
// the only member a method can run on), such as
// interface{ *pDict | *pZDict; m() }. Each member's method is checked as
// a static call; every member's stores and "cannot decide"s count, named
// "for D = *T", and a log counts only if every member's method makes it.
// A caller instantiating D drops the effects of the other members. Any
// other constraint (methods only, any, a ~T term over a non-pointer type,
// which any defined type over T may satisfy with its own method) leaves
// the call "cannot decide", as an interface method call is.
//
// # Fixes
//
// Each unlogged store carries a suggested fix inserting tx.Log(&x.f) (or
// tx.Log(p) for *p) before the statement, as `if err := tx.Log(...); err !=
// nil { return err }` when the function returns an error. -fix applies them.
package txnlog
