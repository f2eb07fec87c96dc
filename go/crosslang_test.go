package engram

// Cross-language tests: pools written from Go are read by the Rust engine
// (the `engram` command: check, info, gc) and pools written by Rust are
// opened from Go. ENGRAM_CLI names the command (make test-go sets it);
// without it the tests look in ../target/debug and skip if it is missing.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func engramCLI(t *testing.T) string {
	t.Helper()
	cli := os.Getenv("ENGRAM_CLI")
	if cli == "" {
		cli, _ = filepath.Abs("../target/debug/engram")
	}
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("engram command not built (%s); run `make test-go`", cli)
	}
	return cli
}

func runCLI(t *testing.T, cli string, args ...string) string {
	t.Helper()
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("engram %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestGoPoolOpensInRust(t *testing.T) {
	cli := engramCLI(t)
	path := tmpPool(t, "go-written.pool")
	p, _ := mustOpen(t, path, processOpts)
	buildList(t, p, 100)
	if err := p.Txn(func(tx *Tx) error {
		r, err := New[record](tx)
		if err != nil {
			return err
		}
		if r.Name, err = String(tx, "written by Go"); err != nil {
			return err
		}
		if r.Items, err = Make[uint32](tx, 2, 2); err != nil {
			return err
		}
		if r.Kids[0], err = New[node](tx); err != nil {
			return err
		}
		r.Kids[0].Value = 1000
		return SetRoot(tx, "rec", r)
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// The Rust engine walks every Go object through the type table.
	runCLI(t, cli, "check", path)
	info := runCLI(t, cli, "info", path)
	if !strings.Contains(info, "test") {
		t.Fatalf("engram info does not show the layout:\n%s", info)
	}
	// The Rust GC keeps exactly what Go linked (pointer, slice and string
	// offsets registered from reflect are right).
	runCLI(t, cli, "gc", path)
	p, _ = mustOpen(t, path, processOpts)
	defer p.Close()
	if got := sum(t, p); got != 5050 {
		t.Fatalf("sum after the Rust GC: %d", got)
	}
	r, err := Root[record](p, "rec")
	if err != nil || r.Name != "written by Go" || len(r.Items) != 2 || r.Kids[0].Value != 1000 {
		t.Fatalf("record after the Rust GC: %v %+v", err, r)
	}
}

func TestRustPoolOpensInGo(t *testing.T) {
	cli := engramCLI(t)
	path := tmpPool(t, "rust-written.pool")
	runCLI(t, cli, "demo", path, "--regions", "3")
	p, first, err := Open(path, &Options{Layout: "engram-demo", Durability: Process})
	if err != nil || first {
		t.Fatalf("open a Rust pool: %v (first %v)", err, first)
	}
	defer p.Close()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	roots, err := p.Roots()
	if err != nil || len(roots) == 0 {
		t.Fatalf("roots of a Rust pool: %v %v", roots, err)
	}
	for _, r := range roots {
		if r.Type == "" || r.Addr == 0 {
			t.Errorf("root %+v", r)
		}
		// A Go type is not the Rust type: a typed error, not a crash.
		if _, err := Root[node](p, r.Name); !errors.Is(err, ErrRootType) {
			t.Errorf("Root[node](%q): %v", r.Name, err)
		}
	}
	if err := p.Collect(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(path, &Options{Layout: "other"}); !errors.Is(err, ErrAlreadyOpen) {
		t.Fatalf("second open of a Rust pool: %v", err)
	}
}
