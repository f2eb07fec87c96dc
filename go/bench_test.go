package engram

// Micro-benchmarks of the Go front end's costs (go test -bench . -run ^$):
// a bare cgo call, an empty transaction, pnew, a logged store, Persist.
// Speed is measured here, never asserted.

import (
	"path/filepath"
	"testing"
)

func benchPool(b *testing.B, mode Durability) *Pool {
	b.Helper()
	p, err := Create(filepath.Join(b.TempDir(), "bench.pool"), &Options{Layout: "bench", Durability: mode})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkCgoCall is the floor every engine call pays: one cgo round trip.
func BenchmarkCgoCall(b *testing.B) {
	for b.Loop() {
		ABIVersion()
	}
}

func BenchmarkTxnEmpty(b *testing.B) {
	p := benchPool(b, Process)
	for b.Loop() {
		_ = p.Txn(func(*Tx) error { return nil })
	}
}

func BenchmarkTxnNew(b *testing.B) {
	p := benchPool(b, Process)
	for b.Loop() {
		_ = p.Txn(func(tx *Tx) error { _, err := New[node](tx); return err })
	}
}

func BenchmarkTxnLogStore(b *testing.B) {
	for _, mode := range []Durability{Process, Pmem} {
		b.Run(map[Durability]string{Process: "process", Pmem: "pmem"}[mode], func(b *testing.B) {
			p := benchPool(b, mode)
			var n *node
			_ = p.Txn(func(tx *Tx) error {
				var err error
				if n, err = New[node](tx); err == nil {
					err = SetRoot(tx, "n", n)
				}
				return err
			})
			for b.Loop() {
				_ = p.Txn(func(tx *Tx) error {
					if err := tx.Log(&n.Value); err != nil {
						return err
					}
					n.Value++
					return nil
				})
			}
		})
	}
}

func BenchmarkPersistPmem(b *testing.B) {
	p := benchPool(b, Pmem)
	var n *node
	_ = p.Txn(func(tx *Tx) error {
		var err error
		if n, err = New[node](tx); err == nil {
			err = SetRoot(tx, "n", n)
		}
		return err
	})
	for b.Loop() {
		n.Value++
		_ = p.Persist(n)
	}
}
