// overwrite_test.go: short values written over the old value's pool bytes
// (store.go's canOverwrite; SET, INCR, MSET with its one log batch):
// shorter, equal and longer values, a key given twice in one MSET, the
// TTL cleared, a compact list overwritten, OBJECT ENCODING, WATCH, a
// value read by GET before the overwrite in the same pipeline, and every
// value after a reopen, against a Go model; and kill -9 during pipelines
// of MSETs (TestOverwriteKill) and of SETs (TestSetPipelineKill).
package redis

import (
	"context"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
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

// TestOverwriteKill kills the server during pipelines of MSETs of short
// values over 60 keys (most written over the old bytes, logged in one
// batch per command): after each restart every key holds the
// acknowledged value with a prefix of the pipeline in flight applied.
func TestOverwriteKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Run("tmpfs", func(t *testing.T) { overwriteKill(t, tmpDir(t), "auto", 60) })
	t.Run("wal", func(t *testing.T) { overwriteKill(t, diskDir(t), "wal", 60) })
}

// TestSetPipelineKill is TestOverwriteKill with pipelines of single-key
// SETs: each client pipeline's SETs are logged ahead with one engine call
// (prelog.go) and each SET's own log is then answered by the Tx without
// one, so a range logged ahead that the engine did not log would leave
// the SET unlogged.
func TestSetPipelineKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	set := func(p goredis.Pipeliner, args []any) { p.Set(ctx0, args[0].(string), args[1], 0) }
	t.Run("tmpfs", func(t *testing.T) { overwriteKillWith(t, tmpDir(t), "auto", 60, 1, set) })
	t.Run("wal", func(t *testing.T) { overwriteKillWith(t, diskDir(t), "wal", 60, 1, set) })
}

var ctx0 = context.Background()

// TestMSetNewKeysKill is TestOverwriteKill over 12000 keys, each of the
// (up to 6, see lives) runs between kills writing its own 2000, so that most MSETs create keys
// (linked with one log batch per command: pDict.addMany) while the table
// grows.
func TestMSetNewKeysKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Run("tmpfs", func(t *testing.T) { overwriteKill(t, tmpDir(t), "auto", 6*2000) })
	t.Run("wal", func(t *testing.T) { overwriteKill(t, diskDir(t), "wal", 6*2000) })
}

// overwriteKill is TestOverwriteKill on a pool in dir in durability mode,
// over keys k0 .. k(nkeys-1): with more than 60, run k (of lives(6))
// writes the k-th sixth of them.
func overwriteKill(t *testing.T, dir, mode string, nkeys int) {
	mset := func(p goredis.Pipeliner, args []any) { p.MSet(ctx0, args...) }
	overwriteKillWith(t, dir, mode, nkeys, 5, mset)
}

// overwriteKillWith is overwriteKill with commands of pairs key-value
// pairs each, sent by send.
func overwriteKillWith(t *testing.T, dir, mode string, nkeys, pairs int, send func(p goredis.Pipeliner, args []any)) {
	ctx := context.Background()
	bin := buildServer(t)
	r := rand.New(rand.NewPCG(11, 12))
	model := map[string]string{}
	done := 0
	n := lives(6)
	for k := 0; k < n; k++ {
		cmd, c := runServer(t, bin, filepath.Join(dir, "o.pool"), "--durability", mode)
		if k > 0 {
			if err := overwriteState(ctx, c, model, nil, nkeys); err != "" {
				t.Fatalf("kill %d: %s", k, err)
			}
		}
		gr := rand.New(rand.NewPCG(13, uint64(k)))
		base, span := 0, nkeys
		if nkeys > 60 {
			span = nkeys / 6
			base = k * span
		}
		next := func() []string {
			var kv []string
			for j := 0; j < pairs; j++ {
				kv = append(kv, "k"+strconv.Itoa(base+gr.IntN(span)), strings.Repeat(strconv.Itoa(gr.IntN(10)), 1+gr.IntN(20)))
			}
			return kv
		}
		inflight, n := killDuringPipelines(t, k, c, cmd, r, model, next, send)
		done += n
		cmd, c = runServer(t, bin, filepath.Join(dir, "o.pool"), "--durability", mode)
		if err := overwriteState(ctx, c, model, inflight, nkeys); err != "" {
			t.Fatalf("kill %d: %s", k, err)
		}
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	if done == 0 {
		t.Fatal("no command was acknowledged")
	}
	t.Logf("%d kills during %d acknowledged commands", n, done)
}

// overwriteState reads k0..k(nkeys-1) and finds the prefix of inflight
// that, applied to model, gives them (model is updated to it); "" if found.
func overwriteState(ctx context.Context, c *goredis.Client, model map[string]string, inflight [][]string, nkeys int) string {
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	vals := c.MGet(ctx, keys...).Val()
	same := func() bool {
		for j, key := range keys {
			want, ok := model[key]
			got, has := vals[j].(string)
			if ok != has || got != want {
				return false
			}
		}
		return true
	}
	return applyPrefix(model, inflight, same, "the keys are not the acknowledged values with any prefix of the commands in flight")
}

// TestHashOverwriteKill kills the server during pipelines of HSETs on a
// table-encoded hash (600 fields) with short values, most written over the
// old value's bytes (hset's storeVal: logOverwrite, one log batch per field):
// after each restart every field holds its acknowledged value with a
// prefix of the pipeline in flight applied.
func TestHashOverwriteKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Run("tmpfs", func(t *testing.T) { hashOverwriteKill(t, tmpDir(t), "auto") })
	t.Run("wal", func(t *testing.T) { hashOverwriteKill(t, diskDir(t), "wal") })
}

// hashOverwriteKill is TestHashOverwriteKill on a pool in dir in
// durability mode.
func hashOverwriteKill(t *testing.T, dir, mode string) {
	ctx := context.Background()
	bin := buildServer(t)
	r := rand.New(rand.NewPCG(21, 22))
	model := map[string]string{}
	var args []any
	for i := 0; i < 600; i++ {
		f := "f" + strconv.Itoa(i)
		model[f] = strings.Repeat("x", 10)
		args = append(args, f, model[f])
	}
	done := 0
	n := lives(6)
	for k := 0; k < n; k++ {
		cmd, c := runServer(t, bin, filepath.Join(dir, "h.pool"), "--durability", mode)
		if k == 0 {
			if err := c.HSet(ctx, "h", args...).Err(); err != nil {
				t.Fatal(err)
			}
			if enc := c.ObjectEncoding(ctx, "h").Val(); enc != "hashtable" {
				t.Fatalf("OBJECT ENCODING h: %s", enc)
			}
		} else if err := hashState(ctx, c, model, nil); err != "" {
			t.Fatalf("kill %d: %s", k, err)
		}
		gr := rand.New(rand.NewPCG(23, uint64(k)))
		next := func() []string {
			var fv []string
			for j := 0; j < 4; j++ {
				fv = append(fv, "f"+strconv.Itoa(gr.IntN(600)), strings.Repeat(strconv.Itoa(gr.IntN(10)), 1+gr.IntN(16)))
			}
			return fv
		}
		send := func(p goredis.Pipeliner, args []any) { p.HSet(ctx, "h", args...) }
		inflight, n := killDuringPipelines(t, k, c, cmd, r, model, next, send)
		done += n
		cmd, c = runServer(t, bin, filepath.Join(dir, "h.pool"), "--durability", mode)
		if err := hashState(ctx, c, model, inflight); err != "" {
			t.Fatalf("kill %d: %s", k, err)
		}
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	if done == 0 {
		t.Fatal("no HSET was acknowledged")
	}
	t.Logf("%d kills during %d acknowledged HSETs", n, done)
}

// hashState reads hash h and finds the prefix of inflight (HSETs' field,
// value lists) that, applied to model, gives it (model is updated to it);
// "" if found.
func hashState(ctx context.Context, c *goredis.Client, model map[string]string, inflight [][]string) string {
	got, err := c.HGetAll(ctx, "h").Result()
	if err != nil {
		return err.Error()
	}
	same := func() bool {
		if len(got) != len(model) {
			return false
		}
		for f, want := range model {
			if got[f] != want {
				return false
			}
		}
		return true
	}
	return applyPrefix(model, inflight, same, "the fields are not the acknowledged values with any prefix of the HSETs in flight")
}

// killDuringPipelines is one round of a pipelined kill test: a writer sends
// pipelines of 100 commands, each built from next's key (or field), value
// pairs and sent by send, and applies every acknowledged pipeline to model;
// after 20-80 ms (r) the server (cmd, client c) is killed (killServer:
// the test fails if it had exited by itself, or if the writer was stopped
// by an error reply rather than the kill). It returns the pipeline that was
// in flight (its pairs, one list per command) and how many commands were
// acknowledged. The client is closed.
func killDuringPipelines(t *testing.T, k int, c *goredis.Client, cmd *exec.Cmd, r *rand.Rand, model map[string]string,
	next func() []string, send func(p goredis.Pipeliner, args []any)) ([][]string, int) {
	ctx := context.Background()
	stop := make(chan [][]string, 1)
	done := 0
	var stopped error
	go func() {
		for {
			batch := make([][]string, 100)
			p := c.Pipeline()
			for i := range batch {
				batch[i] = next()
				args := make([]any, len(batch[i]))
				for j, a := range batch[i] {
					args[j] = a
				}
				send(p, args)
			}
			if _, err := p.Exec(ctx); err != nil {
				stopped = err
				stop <- batch
				return
			}
			for _, m := range batch {
				for j := 0; j < len(m); j += 2 {
					model[m[j]] = m[j+1]
				}
			}
			done += len(batch)
		}
	}()
	time.Sleep(time.Duration(20+r.IntN(60)) * time.Millisecond)
	killServer(t, k, cmd)
	inflight := <-stop // the writer has stopped: done, model and stopped are ours again
	writerStopped(t, k, stopped)
	c.Close()
	return inflight, done
}

// applyPrefix finds the prefix of inflight (key or field, value lists) that,
// applied to model, makes same true; model is updated to it. It returns ""
// if one does, else fail.
func applyPrefix(model map[string]string, inflight [][]string, same func() bool, fail string) string {
	for i := 0; ; i++ {
		if same() {
			return ""
		}
		if i == len(inflight) {
			return fail
		}
		for j := 0; j < len(inflight[i]); j += 2 {
			model[inflight[i][j]] = inflight[i][j+1]
		}
	}
}

// TestSetSameValue: a SET or MSET of the value a key holds writes nothing
// (store.go's storesNothing) but is still a write as Redis sees it: it
// clears a TTL, makes a raw string embstr, aborts a WATCH, and the value
// reads back (also after a reopen); the same in a pipeline, where the
// keys were logged ahead (prelog.go).
func TestSetSameValue(t *testing.T) {
	ctx := context.Background()
	dir := tmpDir(t)
	s, c := start(t, dir+"/same.pool", 0)
	c.Set(ctx, "a", "abc", 0)
	c.Set(ctx, "ttl", "abc", time.Hour)
	c.Set(ctx, "mttl", "abc", time.Hour)
	c.Set(ctx, "raw", "ab", 0)
	c.Append(ctx, "raw", "c")
	c.Set(ctx, "kttl", "abc", time.Hour)
	p := c.Pipeline()
	p.Set(ctx, "a", "abc", 0)
	p.Set(ctx, "ttl", "abc", 0)
	p.MSet(ctx, "a", "abc", "mttl", "abc")
	p.Set(ctx, "raw", "abc", 0)
	p.SetArgs(ctx, "kttl", "abc", goredis.SetArgs{KeepTTL: true})
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]time.Duration{"a": -1, "ttl": -1, "mttl": -1, "raw": -1} {
		if d := c.TTL(ctx, k).Val(); d != want {
			t.Fatalf("TTL %s after a SET of its value: %v, want %v", k, d, want)
		}
	}
	if d := c.TTL(ctx, "kttl").Val(); d <= 0 {
		t.Fatalf("TTL kttl after SET KEEPTTL of its value: %v", d)
	}
	if enc := c.ObjectEncoding(ctx, "raw").Val(); enc != "embstr" {
		t.Fatalf("OBJECT ENCODING after a SET of a raw string's bytes: %s, want embstr", enc)
	}
	err := c.Watch(ctx, func(tx *goredis.Tx) error {
		c.Set(ctx, "a", "abc", 0)
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error { return p.Set(ctx, "a", "lost", 0).Err() })
		return err
	}, "a")
	if err != goredis.TxFailedErr {
		t.Fatalf("EXEC after a watched key was SET to its value: %v", err)
	}
	verify := func(c *goredis.Client, when string) {
		for _, k := range []string{"a", "ttl", "mttl", "raw", "kttl"} {
			if got := c.Get(ctx, k).Val(); got != "abc" {
				t.Fatalf("%s: %s = %q", when, k, got)
			}
		}
	}
	verify(c, "before reopen")
	c.Close()
	s.Close()
	s, c = start(t, dir+"/same.pool", 0)
	verify(c, "after reopen")
	c.Close()
	s.Close()
}
