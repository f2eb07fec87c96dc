// Package engram is a test stub of the Engram Go API: the names and
// signatures the txnlog analyzer recognises, with bodies that do nothing.
// The real package lives at the root of the engram-go module.
package engram

// Pool is an open pool.
type Pool struct{ _ int }

// Tx is a running transaction.
type Tx struct{ _ int }

// Txn runs f as one failure-atomic transaction.
func (p *Pool) Txn(f func(tx *Tx) error) error { return f(&Tx{}) }

// Log undo-logs the pointee of p.
func (tx *Tx) Log(p any) error { return nil }

// LogSlice undo-logs the elements of s.
func LogSlice[T any](tx *Tx, s []T) error { return nil }

// New allocates a zeroed T in the pool (go-pmem's pnew).
func New[T any](tx *Tx) (*T, error) { return new(T), nil }

// Make allocates a slice in the pool (go-pmem's pmake).
func Make[T any](tx *Tx, len, cap int) ([]T, error) { return make([]T, len, cap), nil }

// Root returns the named object.
func Root[T any](pool *Pool, name string) (*T, error) { return new(T), nil }

// SetRoot names p.
func SetRoot(tx *Tx, name string, p any) error { return nil }

// String copies s into the pool.
func String(tx *Tx, s string) (string, error) { return s, nil }

// Bytes copies b into the pool.
func Bytes(tx *Tx, b []byte) ([]byte, error) { return append([]byte(nil), b...), nil }

// LogBatch collects ranges to undo-log together.
type LogBatch struct{ n int }

// BatchLog adds the pointee of p to b.
func BatchLog[T any](tx *Tx, b *LogBatch, p *T) { b.n++ }

// BatchLogSlice adds the elements of s to b.
func BatchLogSlice[T any](tx *Tx, b *LogBatch, s []T) { b.n++ }

// LogBatch undo-logs every range added to b and empties b.
func (tx *Tx) LogBatch(b *LogBatch) error { b.n = 0; return nil }
