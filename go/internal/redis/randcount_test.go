// randcount_test.go: HRANDFIELD / ZRANDMEMBER with a huge negative count
// (picks with repeats) answer an error instead of building a reply of
// |count| elements in memory (Redis streams them; the differential
// checklist cannot send these to redis-server), and CONFIG GET maxmemory
// reports --maxmemory, then the last CONFIG SET, as Redis does.
package redis

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestRandCountBound(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, filepath.Join(tmpDir(t), "r.pool"), 0)
	m(c.HSet(ctx, "h", "f", "v").Result())
	m(c.Do(ctx, "ZADD", "z", "1", "a").Result())
	for _, args := range [][]any{
		{"HRANDFIELD", "h", "-1000000000000"}, {"HRANDFIELD", "h", "-4611686018427387904"},
		{"ZRANDMEMBER", "z", "-1000000000000"}, {"HRANDFIELD", "none", "-1000000000000"},
	} {
		err := c.Do(ctx, args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR value is out of range") {
			t.Fatalf("%v: %v, want out of range", args, err)
		}
	}
	// At the bound: |count| picks with repeats.
	if n := len(m(c.Do(ctx, "HRANDFIELD", "h", "-1000").StringSlice())); n != 1000 {
		t.Fatalf("HRANDFIELD h -1000: %d picks", n)
	}
	if v := m(c.Ping(ctx).Result()); v != "PONG" {
		t.Fatal(v)
	}
}

func TestConfigGetMaxmemory(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, filepath.Join(tmpDir(t), "r.pool"), 64<<20)
	get := func() string { return m(c.ConfigGet(ctx, "maxmemory").Result())["maxmemory"] }
	if v := get(); v != "67108864" {
		t.Fatalf("CONFIG GET maxmemory after --maxmemory 64mb: %s", v)
	}
	m(c.ConfigSet(ctx, "maxmemory", "1gb").Result())
	if v := get(); v != "1073741824" {
		t.Fatalf("after CONFIG SET maxmemory 1gb: %s", v)
	}
	if !strings.Contains(m(c.Info(ctx, "memory").Result()), "maxmemory:1073741824") {
		t.Fatal("INFO memory does not report the configured maxmemory")
	}
	m(c.ConfigSet(ctx, "maxmemory", "0").Result())
	if v := get(); v != "0" {
		t.Fatalf("after CONFIG SET maxmemory 0: %s", v)
	}
}
