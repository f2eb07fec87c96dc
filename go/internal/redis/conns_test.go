// conns_test.go: many idle connections against the built binary (a
// process of its own, so the test's descriptors and the server's do not
// share one limit): each connection answers a PING sent on all of them at
// once, a client keeps working beside them, and connections past
// --maxclients get Redis's error. 2000 by default;
// ENGRAM_REDIS_CONNS=10000 for the ten thousand.
package redis

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

func TestManyIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("ENGRAM_REDIS_CONNS")); err == nil {
		n = v
	}
	if _, err := raiseFDLimit(uint64(n) + 200); err != nil {
		t.Fatal(err)
	}
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < uint64(n)+100 {
		t.Skipf("open-file limit %d is too low for %d connections", l.Cur, n)
	}
	dir := tmpDir(t)
	bin := filepath.Join(dir, "engram-redis")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/engram-pm/engram-go/cmd/engram-redis").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--pool", filepath.Join(dir, "c.pool"), "--maxclients", strconv.Itoa(n+1))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1})
	defer c.Close()
	waitUp(t, c)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	for len(conns) < n {
		cn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, cn)
	}
	for _, cn := range conns {
		if _, err := cn.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	for i, cn := range conns {
		line, err := bufio.NewReader(cn).ReadString('\n')
		if err != nil || line != "+PONG\r\n" {
			t.Fatalf("connection %d: %q %v", i, line, err)
		}
	}
	if err := c.Set(ctx, "beside", "idle", 0).Err(); err != nil || c.Get(ctx, "beside").Val() != "idle" {
		t.Fatal("a client beside the idle ones:", err)
	}
	// n idle + c = maxclients: one more is refused.
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if line, _ := bufio.NewReader(extra).ReadString('\n'); line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("past maxclients: %q", line)
	}
	rss := "?"
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status"); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				rss = strings.TrimSpace(line[6:])
			}
		}
	}
	t.Logf("%d idle connections each answered; the %dth was refused; server RSS %s", n, n+2, rss)
}
