// overwrite_test.go: short values written over the old value's pool bytes
// (store.go's canOverwrite; SET, INCR, MSET with its one log batch):
// shorter, equal and longer values, a key given twice in one MSET, the
// TTL cleared, a compact list overwritten, OBJECT ENCODING, WATCH, a
// value read by GET before the overwrite in the same pipeline, and every
// value after a reopen, against a Go model.
package redis

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func TestOverwriteShortValues(t *testing.T) {
	ctx := context.Background()
	dir := tmpDir(t)
	s, c := start(t, dir+"/o.pool", 0)
	model := map[string]string{}
	r := rand.New(rand.NewPCG(5, 6))
	val := func() string { return strings.Repeat("v", 1+r.IntN(70)) }
	for i := 0; i < 400; i++ {
		var args []any
		for j := 0; j < 1+r.IntN(12); j++ {
			k := "k" + strconv.Itoa(r.IntN(40))
			v := val()
			args = append(args, k, v)
			model[k] = v
		}
		if err := c.MSet(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
		k := "k" + strconv.Itoa(r.IntN(40))
		v := val()
		// GET then SET in one pipeline (one batch): the reply is the old value.
		p := c.Pipeline()
		get := p.Get(ctx, k)
		p.Set(ctx, k, v, 0)
		if _, err := p.Exec(ctx); err != nil && err != goredis.Nil {
			t.Fatal(err)
		}
		if old, ok := model[k]; ok && get.Val() != old {
			t.Fatalf("GET before SET in a pipeline: %q, want %q", get.Val(), old)
		}
		model[k] = v
	}
	// Given twice: the last value wins.
	c.MSet(ctx, "d", "first-longer-value", "d", "2nd")
	model["d"] = "2nd"
	// TTL cleared, a compact list overwritten, encodings.
	c.Set(ctx, "ttl", "abcdef", time.Hour)
	c.RPush(ctx, "lst", "a", "b")
	c.MSet(ctx, "ttl", "xyz", "lst", "12")
	model["ttl"], model["lst"] = "xyz", "12"
	if d := c.TTL(ctx, "ttl").Val(); d != -1 {
		t.Fatalf("TTL after MSET: %v", d)
	}
	if ty := c.Type(ctx, "lst").Val(); ty != "string" {
		t.Fatalf("TYPE after MSET over a list: %s", ty)
	}
	for k, want := range map[string]string{"lst": "int", "ttl": "embstr"} {
		if enc := c.ObjectEncoding(ctx, k).Val(); enc != want {
			t.Fatalf("OBJECT ENCODING %s: %s, want %s", k, enc, want)
		}
	}
	c.Set(ctx, "n", "10", 0)
	c.IncrBy(ctx, "n", 5) // "15" over "10"
	model["n"] = "15"
	// WATCH sees an overwrite.
	err := c.Watch(ctx, func(tx *goredis.Tx) error {
		c.MSet(ctx, "k1", "zz")
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error { return p.Set(ctx, "k1", "lost", 0).Err() })
		return err
	}, "k1")
	if err != goredis.TxFailedErr {
		t.Fatalf("EXEC after a watched key was overwritten: %v", err)
	}
	model["k1"] = "zz"
	verify := func(c *goredis.Client, when string) {
		for k, want := range model {
			if got := c.Get(ctx, k).Val(); got != want {
				t.Fatalf("%s: %s = %q, want %q", when, k, got, want)
			}
		}
	}
	verify(c, "before reopen")
	c.Close()
	s.Close()
	s, c = start(t, dir+"/o.pool", 0)
	verify(c, "after reopen")
	c.Close()
	s.Close()
}
