// serverbin_test.go: the engram-redis binary that the process-level tests
// (kill tests, twemproxy, recovery GC) start, built once per test process
// into a directory removed when the tests end: every test runs the same
// binary, and the package's tests link it once instead of once per test
// (a link of the cgo binary is several seconds of CPU).
package redis

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var serverBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// buildServer is the path of go/cmd/engram-redis built for these tests
// (built at the first call; a build failure fails every caller).
func buildServer(t *testing.T) string {
	t.Helper()
	serverBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "engram-redis-bin-")
		if err != nil {
			serverBin.err = err
			return
		}
		serverBin.dir = dir
		bin := filepath.Join(dir, "engram-redis")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/engram-pm/engram-go/cmd/engram-redis").CombinedOutput(); err != nil {
			serverBin.err = fmt.Errorf("build: %v\n%s", err, out)
			return
		}
		serverBin.path = bin
	})
	if serverBin.err != nil {
		t.Fatal(serverBin.err)
	}
	return serverBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if serverBin.dir != "" {
		os.RemoveAll(serverBin.dir)
	}
	os.Exit(code)
}
