// groupcommit_test.go: on a pool on an ordinary disk (wal mode: one
// fdatasync per committed region) concurrent clients' writes share
// regions: the executor takes every waiting request into one batch, so
// fewer batches commit than commands ran. Counted through INFO
// persistence's group-commit counters, never timed.
package redis

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	engram "github.com/engram-pm/engram-go"
	goredis "github.com/redis/go-redis/v9"
)

func TestGroupCommitWal(t *testing.T) {
	ctx := context.Background()
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: filepath.Join(diskDir(t), "g.pool"), Durability: engram.Wal})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	const clients, each = 20, 25
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1, PoolSize: 1})
			defer c.Close()
			for j := 0; j < each; j++ {
				if err := c.Set(ctx, "k"+strconv.Itoa(i)+":"+strconv.Itoa(j), j, 0).Err(); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	defer c.Close()
	info := c.Info(ctx, "persistence").Val()
	field := func(name string) int {
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatalf("no %s in INFO persistence:\n%s", name, info)
		return 0
	}
	if !strings.Contains(info, "engram_durability:wal\r\n") {
		t.Fatalf("not in wal mode:\n%s", info)
	}
	batches, cmds := field("engram_group_commit_batches"), field("engram_group_commit_commands")
	if cmds < clients*each || batches >= cmds {
		t.Fatalf("%d commands in %d batches: no batch was shared", cmds, batches)
	}
	if n := c.DBSize(ctx).Val(); n != clients*each {
		t.Fatalf("DBSIZE %d, want %d", n, clients*each)
	}
	t.Logf("%d commands in %d batches (%.1f per fdatasync)", cmds, batches, float64(cmds)/float64(batches))
}
