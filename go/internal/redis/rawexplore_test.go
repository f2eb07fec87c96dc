// rawexplore_test.go: the raw string's write paths (rawstr.go: a patch in
// the spare capacity, a move to a larger array) through the crash
// explorer, and APPEND's amortised cost. Each region of the traced
// workload is one APPEND-, SETRANGE- or SETBIT-shaped write; every crash
// image the x86 model allows is recovered and must hold the string of a
// prefix of the regions, still raw (cap > len).
package redis

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
)

const rawExploreRoot = "rawexplore"

// rawExploreHolder is the root: the string's entry.
type rawExploreHolder struct {
	E *pEntry
}

// rawOp is one write: the string becomes newLen bytes, src at off.
type rawOp struct {
	newLen, off int
	src         []byte
}

// apply is rawWrite's choice between the two paths, on a bare entry.
func (op rawOp) apply(tx *engram.Tx, e *pEntry) error {
	if cap(e.Val) > op.newLen {
		return patchRaw(tx, e, op.newLen, op.off, op.src)
	}
	return moveRaw(tx, e, op.newLen, op.off, op.src)
}

// model is the Go string the op leaves.
func (op rawOp) model(s []byte) []byte {
	out := make([]byte, op.newLen)
	copy(out, s)
	copy(out[op.off:], op.src)
	return out
}

func rawExploreOps() []rawOp {
	fill := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	return []rawOp{
		{newLen: 100, off: 0, src: fill('a', 100)},   // a new string: moved into a 201-byte array
		{newLen: 150, off: 100, src: fill('b', 50)},  // APPEND within the spare capacity
		{newLen: 150, off: 20, src: fill('c', 30)},   // SETRANGE inside the string
		{newLen: 190, off: 170, src: fill('d', 20)},  // SETRANGE past the end: a zero gap
		{newLen: 190, off: 3, src: []byte{0x81}},     // SETBIT-shaped: one byte
		{newLen: 400, off: 190, src: fill('e', 210)}, // APPEND past the capacity: moved
		{newLen: 401, off: 400, src: []byte{'f'}},    // a small APPEND in the new array
	}
}

func TestRawStringCrashExplorer(t *testing.T) {
	p, tr, dir := tracedPool(t, "r.pool")
	var h *rawExploreHolder
	var err error
	err = p.Txn(func(tx *engram.Tx) error {
		if h, err = engram.New[rawExploreHolder](tx); err != nil {
			return err
		}
		if h.E, err = engram.New[pEntry](tx); err != nil {
			return err
		}
		h.E.Type = tString
		return engram.SetRoot(tx, rawExploreRoot, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	states := [][]byte{nil}
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	for _, op := range rawExploreOps() {
		if err := p.Txn(func(tx *engram.Tx) error { return op.apply(tx, h.E) }); err != nil {
			t.Fatal(err)
		}
		states = append(states, op.model(states[len(states)-1]))
		if got := h.E.Val; !bytes.Equal(got, states[len(states)-1]) || cap(got) <= len(got) {
			t.Fatalf("after %+v: %d bytes (cap %d), want the model's %d", op.off, len(got), cap(got), len(states[len(states)-1]))
		}
	}
	rep := exploreTraced(t, tr, p, dir, func(p *engram.Pool) error {
		h, err := engram.Root[rawExploreHolder](p, rawExploreRoot)
		if err != nil {
			return err
		}
		got := h.E.Val
		if len(got) > 0 && cap(got) <= len(got) {
			return fmt.Errorf("a %d-byte string lost its spare capacity (cap %d)", len(got), cap(got))
		}
		for _, st := range states {
			if bytes.Equal(got, st) {
				return nil
			}
		}
		return fmt.Errorf("a %d-byte string that no prefix of the regions leaves", len(got))
	})
	t.Logf("%+v", rep)
	if rep.Violations != 0 {
		t.Fatalf("%d violations: %s", rep.Violations, rep.FirstViolation)
	}
}

// TestAppendPatchesInPlace: APPENDs that fit a raw string's spare capacity
// write where the string is (its array does not move), so a run of small
// APPENDs onto a large string costs what they append, not the string's
// length each; the bytes read back whole.
func TestAppendPatchesInPlace(t *testing.T) {
	_, run, lookup := inprocServer(t)
	big := string(bytes.Repeat([]byte("x"), 100_000))
	if got := run("APPEND", "k", big); got != ":100000\r\n" {
		t.Fatalf("APPEND: %q", got)
	}
	entry := func() *pEntry { return lookup("k") }
	at := unsafe.SliceData(entry().Val)
	want := big
	for i := 0; i < 200; i++ {
		part := fmt.Sprintf("<%03d>", i)
		want += part
		if got := run("APPEND", "k", part); got != fmt.Sprintf(":%d\r\n", len(want)) {
			t.Fatalf("APPEND %d: %q", i, got)
		}
		if e := entry(); unsafe.SliceData(e.Val) != at {
			t.Fatalf("APPEND %d of %d bytes moved the %d-byte string (cap %d)", i, len(part), len(e.Val), cap(e.Val))
		}
	}
	if got := run("GETRANGE", "k", "99990", "-1"); got != fmt.Sprintf("$%d\r\n%s\r\n", len(want)-99990, want[99990:]) {
		t.Fatalf("GETRANGE: %q", got)
	}
	if got := run("OBJECT", "ENCODING", "k"); got != "$3\r\nraw\r\n" {
		t.Fatalf("OBJECT ENCODING: %q", got)
	}
	// A short SET over it does not keep the large array: the value moves
	// back into the key's inline entry (entry.go).
	if got := run("SET", "k", "short"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if e := entry(); !e.valInline() || string(e.val()) != "short" || cap(e.Val) != 0 {
		t.Fatalf("after a short SET the value %q is not inline (its own array: %d bytes)", e.val(), cap(e.Val))
	}
}
