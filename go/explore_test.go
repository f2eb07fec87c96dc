package engram

// Crash consistency of Go transactions: a bank ledger and a linked list
// run in Trace mode and go through the crash explorer (Px86); every
// recovered image must keep the invariant. A transfer that forgets a
// tx.Log must be reported.

import (
	"fmt"
	"path/filepath"
	"testing"
)

type bank struct {
	Accounts []uint64
	Log      *entry
	Count    uint64
}

type entry struct {
	Seq  uint64
	Memo string
	Next *entry
}

const accounts, perAccount = 4, 100

func bankInvariant(p *Pool) error {
	b, err := Root[bank](p, "bank")
	if err == ErrNoRoot {
		return nil
	}
	if err != nil {
		return err
	}
	var total uint64
	for _, a := range b.Accounts {
		total += a
	}
	if total != accounts*perAccount {
		return fmt.Errorf("money not conserved: %d", total)
	}
	n := b.Count
	for e := b.Log; e != nil; e = e.Next {
		if e.Seq != n || e.Memo != fmt.Sprintf("transfer %d", e.Seq) {
			return fmt.Errorf("log entry %d (%q) where %d was expected", e.Seq, e.Memo, n)
		}
		n--
	}
	if n != 0 {
		return fmt.Errorf("log ends at %d", n)
	}
	return nil
}

// exploreBank records three transfers and explores them; logTo = false
// forgets to log the credited account.
func exploreBank(t *testing.T, logTo bool) ExploreReport {
	t.Helper()
	dir := t.TempDir()
	tr, err := NewTracer()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Free()
	p, err := Create(filepath.Join(dir, "bank.pool"), &Options{Layout: "bank", Durability: Trace, Tracer: tr, MaxSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Txn(func(tx *Tx) error {
		b, err := New[bank](tx)
		if err != nil {
			return err
		}
		if b.Accounts, err = Make[uint64](tx, accounts, accounts); err != nil {
			return err
		}
		for i := range b.Accounts {
			b.Accounts[i] = perAccount
		}
		return SetRoot(tx, "bank", b)
	}); err != nil {
		t.Fatal(err)
	}
	b, _ := Root[bank](p, "bank")
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		from, to := i%accounts, (i+1)%accounts
		err := p.Txn(func(tx *Tx) error {
			if err := LogSlice(tx, b.Accounts[from:from+1]); err != nil {
				return err
			}
			if logTo {
				if err := tx.Log(&b.Accounts[to]); err != nil {
					return err
				}
			}
			b.Accounts[from] -= 10
			b.Accounts[to] += 10 //engramvet:ignore the seeded missing log this test's explorer must find
			e, err := New[entry](tx)
			if err != nil {
				return err
			}
			if err := tx.Log(b); err != nil {
				return err
			}
			b.Count++
			e.Seq, e.Next = b.Count, b.Log
			if e.Memo, err = String(tx, fmt.Sprintf("transfer %d", b.Count)); err != nil {
				return err
			}
			b.Log = e
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Abandon(); err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Explore(ExploreOptions{Layout: "bank", ScratchDir: dir}, bankInvariant)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Points == 0 || rep.ImagesChecked == 0 {
		t.Fatalf("nothing explored: %+v", rep)
	}
	return rep
}

func TestCrashExplorerBank(t *testing.T) {
	rep := exploreBank(t, true)
	if rep.Violations != 0 {
		t.Fatalf("%d violations: %s", rep.Violations, rep.FirstViolation)
	}
	t.Logf("%d ordering points, %d images checked, 0 violations", rep.Points, rep.ImagesChecked)
}

func TestCrashExplorerFindsMissingLog(t *testing.T) {
	rep := exploreBank(t, false)
	if rep.Violations == 0 {
		t.Fatalf("a missing tx.Log was not reported (%d images checked)", rep.ImagesChecked)
	}
	t.Logf("reported as expected: %s", rep.FirstViolation)
}
