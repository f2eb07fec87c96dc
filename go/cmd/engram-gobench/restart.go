package main

// restart.go: go-pmem's fill-the-heap-then-restart test, in Go on Engram
// and (through `engram-bench restart-one`, the same phases) in Rust.
//
// A child process (this binary with -child fill) creates a pool and fills
// it with a linked list of n small objects (16 bytes each: Next, Val),
// 10^4 per transaction, named by the root "list"; then it either closes
// the pool (clean) or kills itself with SIGKILL (crash: no close, the
// pool's dirty flag stays set). A second child (-child reopen) opens the
// pool and reads the first object of the list. The time reported is from
// just before the parent starts the reopen child to the child's first
// access of an existing object (the child prints the wall clock then):
// process start, Go runtime start, the open (and after a crash the
// recovery) and the root lookup. The same second child also reports the
// open alone, measured inside it. The pool is removed after each run.
//
// Crash behaviour: the crash case is exactly what it tests; a failure of
// either child is reported as "failed", never retried silently.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/engram-pm/engram-go"
)

type listNode struct {
	Next *listNode
	Val  uint64
}

const fillBatch = 10_000

func restartOptions(mode engram.Durability, n uint64) *engram.Options {
	return &engram.Options{Layout: "engram_gobench_restart", Durability: mode, InitialSize: 64<<20 + n*64}
}

// childFill fills a new pool with n list nodes; crash kills the process
// before any close.
func childFill(path string, n uint64, mode engram.Durability, crash bool) error {
	p, err := engram.Create(path, restartOptions(mode, n))
	if err != nil {
		return err
	}
	var head *listNode
	for done := uint64(0); done < n; done += fillBatch {
		if err := p.Txn(func(tx *engram.Tx) error {
			for i := done; i < min(n, done+fillBatch); i++ {
				node, err := engram.New[listNode](tx)
				if err != nil {
					return err
				}
				node.Next, node.Val = head, i
				head = node
			}
			return engram.SetRoot(tx, "list", head)
		}); err != nil {
			return err
		}
	}
	if crash {
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return p.Close()
}

// childReopen opens the pool, reads the list's first node and prints the
// wall clock at that access and the open's own duration.
func childReopen(path string, n uint64, mode engram.Durability) error {
	start := time.Now()
	p, _, err := engram.Open(path, restartOptions(mode, n))
	if err != nil {
		return err
	}
	head, err := engram.Root[listNode](p, "list")
	if err != nil {
		return err
	}
	if head == nil || head.Val != n-1 {
		return fmt.Errorf("first node: %v, want Val %d", head, n-1)
	}
	at := time.Now()
	fmt.Printf("first-access=%d open=%d\n", at.UnixNano(), at.Sub(start).Nanoseconds())
	return p.Close()
}

// runChild is the -child entry point.
func runChild(what, path string, n uint64, mode engram.Durability, crash bool) {
	var err error
	switch what {
	case "fill":
		err = childFill(path, n, mode, crash)
	case "reopen":
		err = childReopen(path, n, mode)
	default:
		err = fmt.Errorf("unknown -child %q", what)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func modeName(mode engram.Durability) string {
	return map[engram.Durability]string{engram.Pmem: "pmem", engram.Msync: "msync", engram.Process: "process"}[mode]
}

// childCmd builds the command line of one phase: Go (this binary with
// -child) when rust is "", else `engram-bench restart-one`.
func childCmd(rust, phase, path string, n uint64, mode engram.Durability, crash bool) *exec.Cmd {
	if rust != "" {
		args := []string{"restart-one", "--phase", phase, "--n", fmt.Sprint(n), "--mode", modeName(mode), "--path", path}
		if crash {
			args = append(args, "--crash")
		}
		return exec.Command(rust, args...)
	}
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return exec.Command(self, "-child", phase, "-path", path, "-n", fmt.Sprint(n), "-mode", modeName(mode), fmt.Sprintf("-crash=%t", crash))
}

// restartOnce fills, closes or crashes, and times the reopen: (process
// start to first access, the open alone).
func restartOnce(rust, dir string, n uint64, mode engram.Durability, crash bool) (time.Duration, time.Duration, error) {
	path := filepath.Join(dir, "engram-gobench-restart.pool")
	defer os.Remove(path)
	fill := childCmd(rust, "fill", path, n, mode, crash)
	out, err := fill.CombinedOutput()
	killed := crash && fill.ProcessState != nil && !fill.ProcessState.Exited()
	if err != nil && !killed {
		return 0, 0, fmt.Errorf("fill child: %v: %s", err, out)
	}
	if crash && !killed {
		return 0, 0, fmt.Errorf("fill child was not killed")
	}
	reopen := childCmd(rust, "reopen", path, n, mode, false)
	start := time.Now()
	out, err = reopen.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("reopen child: %v: %s", err, out)
	}
	var at, open int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "first-access=%d open=%d", &at, &open); err != nil {
		return 0, 0, fmt.Errorf("reopen child printed %q", out)
	}
	return time.Duration(at - start.UnixNano()), time.Duration(open), nil
}

// restartCell is one (implementation, n, crash) cell: the medians of the
// restart and of the open alone (-1 if a run failed).
type restartCell struct{ total, open time.Duration }

// restartCells measures Go and Rust, clean and after a kill, interleaved
// rep by rep: cells[0..3] = Go clean, Rust clean, Go kill, Rust kill.
func restartCells(rust, dir string, n uint64, mode engram.Durability, reps int) [4]restartCell {
	var ts, opens [4][]time.Duration
	failed := [4]bool{}
	for r := 0; r < reps; r++ {
		for i := range 4 {
			impl, crash := "", i >= 2
			if i%2 == 1 {
				impl = rust
			}
			if failed[i] {
				continue
			}
			t, o, err := restartOnce(impl, dir, n, mode, crash)
			if err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
				failed[i] = true
				continue
			}
			ts[i], opens[i] = append(ts[i], t), append(opens[i], o)
		}
	}
	var cells [4]restartCell
	for i := range cells {
		cells[i] = restartCell{-1, -1}
		if !failed[i] && len(ts[i]) > 0 {
			cells[i] = restartCell{median(ts[i]), median(opens[i])}
		}
	}
	return cells
}

func (c restartCell) String() string {
	if c.total < 0 {
		return "failed"
	}
	return fmt.Sprintf("%s (open %s)", show(c.total), show(c.open))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func parseMode(s string) engram.Durability {
	switch s {
	case "pmem":
		return engram.Pmem
	case "msync":
		return engram.Msync
	}
	return engram.Process
}
