// phash_test.go: HSET on a big hash (phash.go's table) of a value equal
// to the field's writes nothing but still answers and counts as Redis's
// does (0, the value kept, a WATCH on the key broken); a different value
// of the same length is written, and both survive a restart.
package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

func TestHSetSameValue(t *testing.T) {
	ctx := context.Background()
	dir := tmpDir(t)
	s, c := start(t, dir+"/h.pool", 0)
	for i := 0; i < 600; i++ { // past hash-max-listpack-entries: a table
		if err := c.HSet(ctx, "h", "f"+strconv.Itoa(i), "xxx").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if enc := c.ObjectEncoding(ctx, "h").Val(); enc != "hashtable" {
		t.Fatalf("encoding %q", enc)
	}
	if n := c.HSet(ctx, "h", "f1", "xxx", "f2", "xyz", "f3", "xx", "f4", "xxxx").Val(); n != 0 {
		t.Fatalf("HSET of existing fields answered %d", n)
	}
	want := map[string]string{"f1": "xxx", "f2": "xyz", "f3": "xx", "f4": "xxxx", "f5": "xxx"}
	check := func(c *goredis.Client, when string) {
		for f, v := range want {
			if got := c.HGet(ctx, "h", f).Val(); got != v {
				t.Fatalf("%s: %s is %q, want %q", when, f, got, v)
			}
		}
	}
	check(c, "after HSET")
	// WATCH h, then HSET h f5 to the value it has: EXEC fails, as Redis's
	// (hsetCommand signals the key modified whatever the value).
	err := c.Watch(ctx, func(tx *goredis.Tx) error {
		if err := c.HSet(ctx, "h", "f5", "xxx").Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.HSet(ctx, "h", "f6", "y")
			return nil
		})
		return err
	}, "h")
	if !errors.Is(err, goredis.TxFailedErr) {
		t.Fatalf("EXEC after a same-value HSET of a watched key: %v, want a failed transaction", err)
	}
	c.Close()
	s.Close()
	_, c = start(t, dir+"/h.pool", 0)
	check(c, "after a restart")
	if n := c.HLen(ctx, "h").Val(); n != 600 {
		t.Fatalf("HLEN %d after a restart", n)
	}
}
