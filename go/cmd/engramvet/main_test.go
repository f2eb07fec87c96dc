// End-to-end test of the engramvet command: built as a binary, run by
// `go vet -vettool` over a throwaway module (the engram stub plus a package
// with one bug in it and one in a helper package, so facts cross packages),
// and standalone with -fix, after which vet has nothing left to say.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const helper = `package helper

type Cell struct{ V int }

func Set(c *Cell, v int) { c.V = v }
`

const demo = `package demo

import (
	"github.com/engram-pm/engram-go"
	"github.com/engram-pm/engram-go/helper"
)

type Node struct {
	Val  int
	Cell *helper.Cell
}

func Update(pool *engram.Pool) error {
	n, err := engram.Root[Node](pool, "n")
	if err != nil {
		return err
	}
	return pool.Txn(func(tx *engram.Tx) error {
		n.Val = 1
		helper.Set(n.Cell, 2)
		return nil
	})
}
`

func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no go command")
	}
	return p
}

func run(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestVetToolAndFix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs go vet")
	}
	gocmd := goTool(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "engramvet")
	if out, err := run(t, ".", gocmd, "build", "-o", bin, "."); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	mod := filepath.Join(tmp, "mod")
	// The engram API stub of the analyzer's corpus.
	stub, err := os.ReadFile(filepath.Join("..", "..", "analysis", "txnlog", "testdata", "src",
		"github.com", "engram-pm", "engram-go", "engram.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":           "module github.com/engram-pm/engram-go\n\ngo 1.26\n",
		"engram.go":        string(stub),
		"helper/helper.go": helper,
		"demo/demo.go":     demo,
	}
	for name, text := range files {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out, err := run(t, mod, gocmd, "vet", "-vettool="+bin, "./...")
	if err == nil {
		t.Fatalf("go vet found nothing:\n%s", out)
	}
	for _, want := range []string{
		"demo.go:19:5: unlogged store to pool memory: n.Val",
		"demo.go:20:13: unlogged store to pool memory in call to helper.Set: c.V (helper.go:5)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("go vet output lacks %q:\n%s", want, out)
		}
	}

	if out, err := run(t, mod, bin, "-fix", "./..."); err == nil {
		t.Logf("-fix output:\n%s", out)
	}
	fixed, err := os.ReadFile(filepath.Join(mod, "demo", "demo.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tx.Log(&n.Val)", "tx.Log(&n.Cell.V)"} {
		if !strings.Contains(string(fixed), want) {
			t.Errorf("-fix did not insert %s:\n%s", want, fixed)
		}
	}
	if out, err := run(t, mod, gocmd, "vet", "-vettool="+bin, "./..."); err != nil {
		t.Errorf("go vet after -fix: %v\n%s", err, out)
	}
}
