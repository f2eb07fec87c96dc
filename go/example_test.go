package engram_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/engram-pm/engram-go"
)

// Node is an element of a persistent linked list.
type Node struct {
	Value int64
	Name  string
	Next  *Node
}

func examplePath(name string) (string, func()) {
	dir, _ := os.MkdirTemp("", "engram-example")
	return filepath.Join(dir, name), func() { os.RemoveAll(dir) }
}

// A program that finds its data again on every run: go-pmem's pmem.Init,
// pnew and named objects.
func Example() {
	path, cleanup := examplePath("list.pool")
	defer cleanup()
	for run := 1; run <= 3; run++ {
		pool, first, err := engram.Open(path, &engram.Options{Layout: "list", Durability: engram.Process})
		if err != nil {
			fmt.Println(err)
			return
		}
		err = pool.Txn(func(tx *engram.Tx) error {
			head, err := engram.Root[Node](pool, "head")
			if err != nil && !errors.Is(err, engram.ErrNoRoot) {
				return err
			}
			n, err := engram.New[Node](tx) // pnew
			if err != nil {
				return err
			}
			n.Value, n.Next = int64(run), head // a fresh object needs no log
			if n.Name, err = engram.String(tx, fmt.Sprintf("run %d", run)); err != nil {
				return err
			}
			return engram.SetRoot(tx, "head", n)
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		head, _ := engram.Root[Node](pool, "head")
		fmt.Print("first run: ", first, "; list:")
		for n := head; n != nil; n = n.Next {
			fmt.Print(" ", n.Name)
		}
		fmt.Println()
		pool.Close()
	}
	// Output:
	// first run: true; list: run 1
	// first run: false; list: run 2 run 1
	// first run: false; list: run 3 run 2 run 1
}

// Changing existing pool memory: log it first, then store through the
// pointer. An error (or a panic) undoes everything the transaction did.
func ExampleTx_Log() {
	path, cleanup := examplePath("log.pool")
	defer cleanup()
	pool, _ := engram.Create(path, &engram.Options{Durability: engram.Process})
	defer pool.Close()
	_ = pool.Txn(func(tx *engram.Tx) error {
		n, err := engram.New[Node](tx)
		if err != nil {
			return err
		}
		n.Value = 1
		return engram.SetRoot(tx, "n", n)
	})
	n, _ := engram.Root[Node](pool, "n")
	err := pool.Txn(func(tx *engram.Tx) error {
		if err := tx.Log(&n.Value); err != nil { // undo-log one field
			return err
		}
		n.Value = 2
		return errors.New("changed my mind")
	})
	fmt.Println(err, n.Value)
	_ = pool.Txn(func(tx *engram.Tx) error {
		if err := tx.Log(n); err != nil { // the whole struct
			return err
		}
		n.Value = 3
		return nil
	})
	fmt.Println(n.Value)
	// Output:
	// changed my mind 1
	// 3
}

// pmake: slices in the pool; LogSlice logs a range of elements.
func ExampleMake() {
	path, cleanup := examplePath("make.pool")
	defer cleanup()
	pool, _ := engram.Create(path, &engram.Options{Durability: engram.Process})
	defer pool.Close()
	type Series struct{ Points []float64 }
	_ = pool.Txn(func(tx *engram.Tx) error {
		s, err := engram.New[Series](tx)
		if err != nil {
			return err
		}
		if s.Points, err = engram.Make[float64](tx, 4, 4); err != nil {
			return err
		}
		return engram.SetRoot(tx, "series", s)
	})
	s, _ := engram.Root[Series](pool, "series")
	_ = pool.Txn(func(tx *engram.Tx) error {
		if err := engram.LogSlice(tx, s.Points[1:3]); err != nil {
			return err
		}
		s.Points[1], s.Points[2] = 1.5, 2.5
		return nil
	})
	fmt.Println(s.Points)
	// Output: [0 1.5 2.5 0]
}

// Types the pool cannot hold are refused with an error naming the field.
func ExampleNew_unsupported() {
	path, cleanup := examplePath("bad.pool")
	defer cleanup()
	pool, _ := engram.Create(path, &engram.Options{Durability: engram.Process})
	defer pool.Close()
	type Cache struct {
		Hits  int
		Index map[string]int
	}
	err := pool.Txn(func(tx *engram.Tx) error {
		_, err := engram.New[Cache](tx)
		return err
	})
	fmt.Println(errors.Is(err, engram.ErrUnsupportedType))
	fmt.Println(err)
	// Output:
	// true
	// engram: type cannot live in a pool: github.com/engram-pm/engram-go_test.Cache.Index has type map[string]int (a map cannot live in a pool: it would point into the Go heap)
}
