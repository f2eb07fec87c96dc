// ownserver_test.go: the kill tests' start (ownServer) never checks another
// process's server. The old start (the same port at every restart, ready
// when PING answers) did: with another kill test's server on the port it
// passed the kill test's INFO checks (wal, not clean) and read that
// server's keys, which is the one unexplained "lost acknowledged write"
// of TestKill9Disk's shape (docs/redis.md, "Session 2026-12-01").
package redis

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func TestOwnServerRefusesForeign(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ctx := context.Background()
	dir := diskDir(t)
	bin := buildServer(t)
	wal := []string{"--durability", "wal"}
	// Our pool: w13 = "3" acknowledged.
	cmd, c, _ := ownServer(t, bin, append([]string{"--pool", filepath.Join(dir, "own.pool")}, wal...)...)
	m(c.Set(ctx, "w13", "3", 0).Result())
	c.Close()
	cmd.Process.Kill()
	cmd.Wait()
	// Another kill test's server (wal, killed once, w13 = "1") that took
	// port p while our server was down.
	foreign := append([]string{"--pool", filepath.Join(dir, "foreign.pool")}, wal...)
	fcmd, fc, p := ownServer(t, bin, foreign...)
	m(fc.Set(ctx, "w13", "1", 0).Result())
	fc.Close()
	fcmd.Process.Kill()
	fcmd.Wait()
	fcmd, fc = startOwned(t, bin, p, foreign)
	if fc == nil {
		t.Skipf("port %d was taken by yet another process meanwhile", p)
	}
	defer func() { fc.Close(); fcmd.Process.Kill(); fcmd.Wait() }()

	// 1. The old start on port p: our server cannot bind and exits, and
	//    the foreign server passes the kill test's checks and answers.
	old := exec.Command(bin, append([]string{"--port", strconv.Itoa(p), "--pool", filepath.Join(dir, "own.pool")}, wal...)...)
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	oc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p), MaxRetries: -1, DialTimeout: time.Second})
	waitUp(t, oc)
	info := oc.Info(ctx, "persistence").Val()
	if !strings.Contains(info, "engram_durability:wal\r\n") || !strings.Contains(info, "engram_was_clean:0\r\n") {
		t.Fatalf("the foreign server does not pass the kill test's INFO check:\n%s", info)
	}
	if got := oc.Get(ctx, "w13").Val(); got != "1" {
		t.Fatalf("the old start read w13 = %q: want the foreign server's \"1\"", got)
	}
	oc.Close()
	if err := old.Wait(); err == nil {
		t.Fatal("our server on a taken port exited cleanly")
	}

	// 2. startOwned refuses the port, ownServer finds another.
	if cmd, c := startOwned(t, bin, p, append([]string{"--pool", filepath.Join(dir, "own.pool")}, wal...)); c != nil {
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("startOwned accepted port %d, which another server holds", p)
	}
	cmd, c, q := ownServer(t, bin, append([]string{"--pool", filepath.Join(dir, "own.pool")}, wal...)...)
	defer func() { c.Close(); cmd.Process.Kill(); cmd.Wait() }()
	if got := m(c.Get(ctx, "w13").Result()); q == p || got != "3" {
		t.Fatalf("ownServer: port %d (foreign %d), w13 = %q, want our \"3\"", q, p, got)
	}
}
