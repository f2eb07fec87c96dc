// recoverygc_test.go: after kill -9 the server answers while the engine's
// recovery GC still runs in the background (the default, the region card
// table), and nothing acknowledged is lost to that GC.
//
// TestRecoveryGCBackground fills a pool with many keys and garbage
// (overwritten values are left to the collector), kills the built server
// with SIGKILL while a client overwrites keys, restarts it, reads and
// writes while INFO persistence says the GC is pending, and after it says
// finished checks every acknowledged key, then crashes it once more during
// the next open's background GC and checks again.
package redis

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// rgcKeys: keys written before the first kill (ENGRAM_REDIS_RGC_KEYS).
const rgcKeys = 60_000

func TestRecoveryGCBackground(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := tmpDir(t)
	bin := buildServer(t)
	pool := filepath.Join(dir, "rgc.pool")
	ctx := context.Background()
	acked := map[string]string{}
	n := rgcKeys
	if v, err := strconv.Atoi(os.Getenv("ENGRAM_REDIS_RGC_KEYS")); err == nil && v > 0 {
		n = v
	}

	run := func() (*exec.Cmd, *goredis.Client) { return runServer(t, bin, pool) }
	kill := func(cmd *exec.Cmd, c *goredis.Client) {
		cmd.Process.Kill()
		cmd.Wait()
		c.Close()
	}

	// 1. many keys, each written twice (the first values become garbage)
	cmd, c := run()
	for round := 0; round < 2; round++ {
		for i := 0; i < n; i += 500 {
			kv := make([]any, 0, 1000)
			for j := i; j < min(i+500, n); j++ {
				k, v := "key:"+strconv.Itoa(j), strconv.Itoa(round)+"-"+strings.Repeat("v", j%40)
				kv = append(kv, k, v)
			}
			if err := c.MSet(ctx, kv...).Err(); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < len(kv); j += 2 {
				acked[kv[j].(string)] = kv[j+1].(string)
			}
		}
	}
	// 2. overwrite keys until the kill; the one in flight may land or not
	inflight := make(chan [2]string, 1)
	done := make(chan struct{})
	var stopped error
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			k, v := "key:"+strconv.Itoa(i*7919%n), "w"+strconv.Itoa(i)
			inflight <- [2]string{k, v}
			if stopped = c.Set(ctx, k, v, 0).Err(); stopped != nil {
				return
			}
			<-inflight
			acked[k] = v
		}
	}()
	time.Sleep(200 * time.Millisecond)
	killServer(t, 0, cmd)
	c.Close()
	<-done
	writerStopped(t, 0, stopped)
	var maybe [2]string
	select {
	case maybe = <-inflight:
	default:
	}

	// 3. restart: it answers; reads and writes while the GC runs
	cmd, c = run()
	info := c.Info(ctx, "persistence").Val()
	if !strings.Contains(info, "engram_was_clean:0\r\n") || !strings.Contains(info, "engram_recovery_gc_in:background\r\n") {
		t.Fatalf("after kill -9 the recovery GC did not run in the background:\n%s", info)
	}
	pendingSeen, during := 0, 0
	for i := 0; ; i++ {
		info = c.Info(ctx, "persistence").Val()
		if strings.Contains(info, "engram_recovery_gc:finished\r\n") {
			break
		}
		if !strings.Contains(info, "engram_recovery_gc:pending\r\n") {
			t.Fatalf("recovery GC neither pending nor finished:\n%s", info)
		}
		pendingSeen++
		k := "key:" + strconv.Itoa(i*31%n)
		if got := c.Get(ctx, k).Val(); got != acked[k] && !(maybe[0] == k && got == maybe[1]) {
			t.Fatalf("during the GC: %s = %q, acknowledged %q", k, got, acked[k])
		}
		nk, nv := "during:"+strconv.Itoa(i), strconv.Itoa(i)
		if err := c.Set(ctx, nk, nv, 0).Err(); err != nil {
			t.Fatal(err)
		}
		acked[nk] = nv
		during++
	}
	t.Logf("INFO said pending %d times; %d SETs during the GC\n%s", pendingSeen, during, info)
	if !strings.Contains(info, "engram_recovery_gc_freed:") || strings.Contains(info, "engram_recovery_gc_freed:0\r\n") {
		t.Fatalf("the background GC freed nothing (the overwritten values were garbage):\n%s", info)
	}
	checkAcked(t, c, acked, maybe)

	// 4. kill -9 again at once (the next open's GC may be mid-way), then check
	kill(cmd, c)
	cmd, c = run()
	kill(cmd, c)
	cmd, c = run()
	for !strings.Contains(c.Info(ctx, "persistence").Val(), "engram_recovery_gc:finished\r\n") {
		time.Sleep(20 * time.Millisecond)
	}
	checkAcked(t, c, acked, maybe)
	if err := c.Shutdown(ctx).Err(); err != nil && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "closed") {
		t.Logf("shutdown: %v", err)
	}
	cmd.Wait()
	c.Close()
}

// checkAcked: every acknowledged key holds its value (the write in flight
// at the kill may hold the new one) and nothing else is in the keyspace.
func checkAcked(t *testing.T, c *goredis.Client, acked map[string]string, maybe [2]string) {
	t.Helper()
	ctx := context.Background()
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	for i := 0; i < len(keys); i += 1000 {
		batch := keys[i:min(i+1000, len(keys))]
		vals := c.MGet(ctx, batch...).Val()
		for j, k := range batch {
			got, _ := vals[j].(string)
			if got != acked[k] && !(maybe[0] == k && got == maybe[1]) {
				t.Fatalf("%s = %q, acknowledged %q", k, got, acked[k])
			}
		}
	}
	if n := c.DBSize(ctx).Val(); n != int64(len(acked)) {
		t.Fatalf("DBSIZE %d, %d keys acknowledged", n, len(acked))
	}
}
