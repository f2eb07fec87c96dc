// server_test.go: end-to-end tests with the go-redis client against a
// server on a free 127.0.0.1 port with a pool in a temp dir: commands and
// reply types, restart keeps data, MULTI/EXEC/WATCH, blocking pops,
// pub/sub, a full pool (-OOM, reads and deletes still work), bad input,
// and kill -9 torture of the built binary (acknowledged writes survive).
package redis

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func start(t *testing.T, pool string, maxmem uint64) (*Server, *goredis.Client) {
	t.Helper()
	return startCfg(t, Config{Addr: "127.0.0.1:0", Pool: pool, MaxMemory: maxmem})
}

// startCfg starts a server with cfg and a go-redis client of it.
func startCfg(t *testing.T, cfg Config) (*Server, *goredis.Client) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1, ReadTimeout: time.Minute})
	t.Cleanup(func() { c.Close(); s.Close() })
	return s, c
}

// m unwraps a result; an error panics (failing the test).
func m[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCommandsAndRestart(t *testing.T) {
	ctx := context.Background()
	pool := filepath.Join(tmpDir(t), "r.pool")
	s, c := start(t, pool, 0)
	m(c.Set(ctx, "k", "v", 0).Result())
	if v := m(c.Get(ctx, "k").Result()); v != "v" {
		t.Fatalf("get %q", v)
	}
	if n := m(c.Incr(ctx, "n").Result()); n != 1 {
		t.Fatal(n)
	}
	m(c.RPush(ctx, "l", "a", "b", "c").Result())
	m(c.HSet(ctx, "h", "f", "1", "g", "2").Result())
	m(c.SAdd(ctx, "s", "x", "y").Result())
	m(c.ZAdd(ctx, "z", goredis.Z{Score: 2, Member: "b"}, goredis.Z{Score: 1, Member: "a"}).Result())
	if r := m(c.ZRangeWithScores(ctx, "z", 0, -1).Result()); len(r) != 2 || r[0].Member != "a" || r[1].Score != 2 {
		t.Fatal(r)
	}
	if _, err := c.LPush(ctx, "k", "x").Result(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "nosuch", "a").Result(); err == nil || !strings.Contains(err.Error(), "unknown command 'nosuch'") {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "get").Result(); err == nil || !strings.Contains(err.Error(), "wrong number of arguments for 'get'") {
		t.Fatal(err)
	}
	// Many keys: the table grows through incremental rehash.
	pipe := c.Pipeline()
	for i := 0; i < 3000; i++ {
		pipe.Set(ctx, "key:"+strconv.Itoa(i), i, 0)
	}
	m(pipe.Exec(ctx))
	m(c.Set(ctx, "gone", "x", 50*time.Millisecond).Result())
	c.Close()
	s.Close()
	_, c = start(t, pool, 0)
	for i := 0; i < 3000; i += 97 {
		if v := m(c.Get(ctx, "key:"+strconv.Itoa(i)).Result()); v != strconv.Itoa(i) {
			t.Fatalf("after restart key:%d = %q", i, v)
		}
	}
	if r := m(c.LRange(ctx, "l", 0, -1).Result()); strings.Join(r, ",") != "a,b,c" {
		t.Fatal(r)
	}
	if v := m(c.HGet(ctx, "h", "g").Result()); v != "2" {
		t.Fatal(v)
	}
	time.Sleep(60 * time.Millisecond)
	if n := m(c.Exists(ctx, "gone").Result()); n != 0 {
		t.Fatal("expired key still there")
	}
	if n := m(c.DBSize(ctx).Result()); n != 3006 {
		t.Fatalf("dbsize %d", n)
	}
	keys := map[string]bool{}
	var cur uint64
	for {
		ks, next := must2(t, c.Scan(ctx, cur, "key:*", 100))
		for _, k := range ks {
			keys[k] = true
		}
		if cur = next; cur == 0 {
			break
		}
	}
	if len(keys) != 3000 {
		t.Fatalf("scan found %d", len(keys))
	}
}

func must2(t *testing.T, c *goredis.ScanCmd) ([]string, uint64) {
	t.Helper()
	k, n, err := c.Result()
	if err != nil {
		t.Fatal(err)
	}
	return k, n
}

func TestMultiWatchBlockPubSub(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, filepath.Join(tmpDir(t), "r.pool"), 0)
	cmds := m(c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, "a", "1", 0)
		p.Incr(ctx, "a")
		return nil
	}))
	if len(cmds) != 2 || m(c.Get(ctx, "a").Result()) != "2" {
		t.Fatal(cmds)
	}
	c2 := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	defer c2.Close()
	err := c.Watch(ctx, func(tx *goredis.Tx) error {
		c2.Set(ctx, "a", "changed", 0)
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error { p.Set(ctx, "a", "mine", 0); return nil })
		return err
	}, "a")
	if err != goredis.TxFailedErr || m(c.Get(ctx, "a").Result()) != "changed" {
		t.Fatal("WATCH did not abort", err)
	}
	got := make(chan []string, 1)
	go func() {
		r, _ := c2.BLPop(ctx, 0, "q").Result()
		got <- r
	}()
	time.Sleep(50 * time.Millisecond)
	m(c.RPush(ctx, "q", "item").Result())
	if r := <-got; len(r) != 2 || r[1] != "item" {
		t.Fatal(r)
	}
	if _, err := c.BLPop(ctx, 150*time.Millisecond, "empty").Result(); err != goredis.Nil {
		t.Fatal("timeout", err)
	}
	sub := c2.Subscribe(ctx, "ch")
	defer sub.Close()
	m(sub.Receive(ctx))
	if n := m(c.Publish(ctx, "ch", "hello").Result()); n != 1 {
		t.Fatal(n)
	}
	msg := m(sub.ReceiveMessage(ctx))
	if msg.Payload != "hello" {
		t.Fatal(msg)
	}
	c3 := goredis.NewClient(&goredis.Options{Addr: s.Addr(), Protocol: 3})
	defer c3.Close()
	m(c3.HSet(ctx, "h3", "f", "v").Result())
	if h := m(c3.HGetAll(ctx, "h3").Result()); h["f"] != "v" {
		t.Fatal(h)
	}
}

func TestPoolFull(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, filepath.Join(tmpDir(t), "r.pool"), 8<<20)
	big := strings.Repeat("x", 64<<10)
	var oom error
	n := 0
	for i := 0; i < 1000 && oom == nil; i++ {
		_, oom = c.Set(ctx, "big"+strconv.Itoa(i), big, 0).Result()
		if oom == nil {
			n++
		}
	}
	if oom == nil || !strings.HasPrefix(oom.Error(), "OOM ") {
		t.Fatalf("no OOM after %d sets: %v", n, oom)
	}
	for i := 0; i < n; i++ {
		if v := m(c.Get(ctx, "big"+strconv.Itoa(i)).Result()); len(v) != len(big) {
			t.Fatalf("big%d lost", i)
		}
	}
	for i := 0; i < n; i++ {
		m(c.Del(ctx, "big"+strconv.Itoa(i)).Result())
	}
	m(c.Set(ctx, "after", "ok", 0).Result())
}

func rawReply(t *testing.T, addr, send string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	conn.Write([]byte(send))
	conn.(*net.TCPConn).CloseWrite()
	r := bufio.NewReader(conn)
	line, _ := r.ReadString('\n')
	return line
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, filepath.Join(tmpDir(t), "r.pool"), 0)
	m(c.Set(ctx, "keep", "1", 0).Result())
	for _, in := range []string{
		"*1\r\n$1099511627776\r\n",   // bulk length 2^40
		"*2\r\n$3\r\nGET\r\n:12\r\n", // not a bulk
		"*x\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\na", // unterminated, then close
		"SET \"a\r\n",                // unbalanced quotes
	} {
		rep := rawReply(t, s.Addr(), in)
		if rep != "" && !strings.HasPrefix(rep, "-ERR Protocol error") {
			t.Fatalf("%q -> %q", in, rep)
		}
	}
	if rep := rawReply(t, s.Addr(), "PING\r\n"); rep != "+PONG\r\n" {
		t.Fatal("inline", rep)
	}
	// Disconnect mid-pipeline.
	conn, _ := net.Dial("tcp", s.Addr())
	conn.Write([]byte("*3\r\n$3\r\nSET\r\n$2\r\nmp\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$2\r\nmq\r\n$5\r\nab"))
	conn.Close()
	// Many idle connections.
	var idle []net.Conn
	for i := 0; i < 500; i++ {
		cn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			break
		}
		idle = append(idle, cn)
	}
	if v := m(c.Get(ctx, "keep").Result()); v != "1" {
		t.Fatal(v)
	}
	for _, cn := range idle {
		cn.Close()
	}
}

// TestKill9 builds the binary and kills it at random moments while
// clients write; every acknowledged write must be there after restart.
// ENGRAM_REDIS_KILLS sets the number of kills (default 100).
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	kill9(t, tmpDir(t), "auto", killCount(100))
}

// TestKill9Disk is the same torture with the pool on an ordinary disk
// (ext4 here) in the server's default mode there, wal: a write-ahead log
// with one fdatasync per batch (group commit). ENGRAM_REDIS_DISK_DIR picks
// the directory (default: the test's temp dir, or target/ when that is
// tmpfs); ENGRAM_REDIS_KILLS the count (30 by default: the disk is slow).
func TestKill9Disk(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	kill9(t, diskDir(t), "wal", killCount(30))
}

// lives is how many servers a per-command kill test (overwrites, hash,
// list, sorted set; each kill during a pipeline of one command shape)
// starts and kills: full with ENGRAM_REDIS_DEEP=1, half of it (at least 2)
// otherwise, to keep make test's time; the crash explorer tests cover the
// same logging steps exhaustively. TestKill9's kills (ENGRAM_REDIS_KILLS,
// 100 by default) always run.
func lives(full int) int {
	if os.Getenv("ENGRAM_REDIS_DEEP") == "1" {
		return full
	}
	return max(2, full/2)
}

func killCount(def int) int {
	if v, err := strconv.Atoi(os.Getenv("ENGRAM_REDIS_KILLS")); err == nil {
		return v
	}
	return def
}

// diskDir is a temp directory that is not on tmpfs (skips if none).
func diskDir(t *testing.T) string {
	for _, base := range []string{os.Getenv("ENGRAM_REDIS_DISK_DIR"), os.TempDir(), "../../target"} {
		if base == "" {
			continue
		}
		var fs syscall.Statfs_t
		if syscall.Statfs(base, &fs) != nil || fs.Type == 0x01021994 { // TMPFS_MAGIC
			continue
		}
		d, err := os.MkdirTemp(base, "engram-redis-disk-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	t.Skip("no directory off tmpfs")
	return ""
}

// kill9 starts the built server on a pool in dir with --durability mode,
// writes from a client that records every acknowledged write, kills the
// server with SIGKILL at a random moment, restarts it and checks every
// acknowledged write (and that no MULTI is partly visible), kills times;
// the last kill is checked by one more restart.
func kill9(t *testing.T, dir, mode string, kills int) {
	runKills(t, killPlan{dir: dir, mode: mode, kills: kills, aim: func(*testing.T, *killLife) string {
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		return "random"
	}})
}

// killPlan is one kill test: the pool's directory and durability mode, the
// number of kills, the server's extra environment, how many writer rounds
// each life completes before aim is called (0: aim at once), and aim, which
// waits for the moment to kill and names its kind (counted in the log).
type killPlan struct {
	dir, mode string
	kills     int
	env       []string
	rounds    int
	aim       func(t *testing.T, l *killLife) string
	// startKills: before every startKills-th life the server is also killed
	// once during its start (the open's log replay and recovery); 0: never.
	startKills int
	// afterOpen, when set, runs when a life's server answers (before the
	// writer starts); beforeKill once the writer has done its rounds,
	// before aim.
	afterOpen, beforeKill func(t *testing.T, l *killLife)
}

// killLife is one run of the server between two kills.
type killLife struct {
	k    int
	cmd  *exec.Cmd
	pool string
	// salt is the log header's salt when the server answered (wal mode).
	salt uint64
}

// killState is what the kill test's client has had acknowledged.
type killState struct {
	acked  map[string]int // key -> last acknowledged value
	fresh  int            // u0 .. u(fresh-1) were acknowledged (each SET once)
	multis int            // acknowledged MULTI INCR m1 INCR m2 EXEC
	pushed int            // acknowledged MULTI pushes into q, h, z, s
}

// runKills runs plan (see kill9) and logs how many kills of each kind
// (aim's names) there were.
func runKills(t *testing.T, plan killPlan) {
	bin := buildServer(t)
	ctx := context.Background()
	st := &killState{acked: map[string]int{}}
	pool := filepath.Join(plan.dir, "t.pool")
	args := []string{"--pool", pool, "--durability", plan.mode}
	kinds := map[string]int{}
	var down time.Duration // from each kill to the restarted server answering
	for k := 0; k <= plan.kills; k++ {
		if plan.startKills > 0 && k > 0 && k%plan.startKills == 0 {
			kinds[killDuringStart(t, bin, plan.env, args, down/time.Duration(k))]++
		}
		started := time.Now()
		cmd, c, _ := ownServerEnv(t, plan.env, bin, args...)
		down += time.Since(started)
		life := &killLife{k: k, cmd: cmd, pool: pool}
		checkKilled(t, k, c, plan.mode, st)
		if k == plan.kills {
			c.Close()
			cmd.Process.Kill()
			cmd.Wait()
			break
		}
		if plan.afterOpen != nil {
			plan.afterOpen(t, life)
		}
		ready, done := make(chan struct{}), make(chan error, 1)
		// Until the writer has had each kind of write acknowledged once, a
		// life runs two full rounds before its kill: on a busy machine a
		// kill at once could otherwise land before any push, every life.
		rounds := plan.rounds
		if rounds < 2 && (st.fresh == 0 || st.multis == 0 || st.pushed == 0) {
			rounds = 2
		}
		go func() { done <- st.write(ctx, c, rounds, ready) }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("kill %d: the writer stopped before the kill: %v%s", k, err, serverStderr(cmd))
		}
		if plan.beforeKill != nil {
			plan.beforeKill(t, life)
		}
		kind := plan.aim(t, life)
		killServer(t, k, cmd)
		kinds[kind]++
		writerStopped(t, k, <-done)
		c.Close()
	}
	total := 0
	for _, v := range st.acked {
		total += v
	}
	if total == 0 || st.fresh == 0 || st.multis == 0 || st.pushed == 0 {
		t.Fatalf("too little was acknowledged: %d SETs, %d new keys, %d MULTI INCRs, %d MULTI pushes", total, st.fresh, st.multis, st.pushed)
	}
	t.Logf("%s: %d kills %v, %d acknowledged SETs over 20 keys and of %d new keys, %d MULTI INCR pairs and %d MULTI pushes (list, hash, sorted set, set) checked; a restart took %v on average",
		plan.mode, plan.kills, kinds, total, st.fresh, st.multis, st.pushed, down/time.Duration(plan.kills+1))
}

// killServer kills a kill test's server (cmd) with SIGKILL, failing the
// test first if it had exited by itself: a server that crashed, or gave up
// after a failed log write, must not pass for one the test killed.
func killServer(t *testing.T, k int, cmd *exec.Cmd) {
	t.Helper()
	if exited(cmd.Process.Pid) {
		t.Fatalf("kill %d: the server exited before it was killed%s", k, serverStderr(cmd))
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// writerStopped fails the test if err, which stopped a kill test's writer,
// is an error reply of the server rather than the connection's end (which
// the kill causes): a server that answers -ERR to every write (its log
// failed) loses nothing it acknowledged and would otherwise pass.
func writerStopped(t *testing.T, k int, err error) {
	t.Helper()
	var re goredis.Error
	if err != nil && err != goredis.Nil && errors.As(err, &re) {
		t.Fatalf("kill %d: the writer got an error reply before the kill: %v", k, err)
	}
}

// checkKilled checks the server after kill k: INFO says mode and (after a
// kill) an unclean open; every acknowledged SET is there (or its one
// unacknowledged successor); every acknowledged new key u<i> is (checkFresh);
// m1 = m2 is the acknowledged MULTI count or one more; the collections
// (checkColls). st takes in the unacknowledged writes found.
func checkKilled(t *testing.T, k int, c *goredis.Client, mode string, st *killState) {
	ctx := context.Background()
	info, err := c.Info(ctx, "persistence").Result()
	if err != nil || mode != "auto" && !strings.Contains(info, "engram_durability:"+mode+"\r\n") ||
		k > 0 && !strings.Contains(info, "engram_was_clean:0\r\n") {
		t.Fatalf("kill %d: INFO persistence (%v) does not say %s after a kill:\n%s", k, err, mode, info)
	}
	for key, v := range st.acked {
		got, err := c.Get(ctx, key).Result()
		if err != nil || got != strconv.Itoa(v) && got != strconv.Itoa(v+1) {
			t.Fatalf("kill %d: %s = %q (%v), acknowledged %d", k, key, got, err, v)
		}
		if got == strconv.Itoa(v+1) {
			st.acked[key] = v + 1 // written, killed before the ack
		}
	}
	st.fresh = checkFresh(t, k, c, st.fresh)
	m1, m2 := counter(t, k, c, "m1"), counter(t, k, c, "m2")
	if m1 != m2 {
		t.Fatalf("kill %d: partial MULTI m1=%d m2=%d", k, m1, m2)
	}
	if m1 != st.multis && m1 != st.multis+1 {
		t.Fatalf("kill %d: m1 = m2 = %d, %d MULTI INCRs acknowledged", k, m1, st.multis)
	}
	st.multis = m1
	st.pushed = checkColls(t, k, c, st.pushed)
}

// checkFresh checks the keys the kill test SETs once each: u0 .. u(n-1)
// hold 0 .. n-1 (their entries are written by one commit each and never
// again, so a commit record lost by the log shows here even when later
// writes to the same keys would have covered it up), u<n> is missing or n
// (written, killed before the ack), and u<n+1> is missing. It returns the
// count now there.
func checkFresh(t *testing.T, k int, c *goredis.Client, n int) int {
	keys := make([]string, n+2)
	for i := range keys {
		keys[i] = "u" + strconv.Itoa(i)
	}
	vals, err := c.MGet(context.Background(), keys...).Result()
	if err != nil {
		t.Fatalf("kill %d: MGET u0..u%d: %v", k, n+1, err)
	}
	for i, v := range vals {
		want := strconv.Itoa(i)
		switch {
		case i < n && v != want:
			t.Fatalf("kill %d: u%d = %v, acknowledged %s", k, i, v, want)
		case i == n && v != nil && v != want, i == n+1 && v != nil:
			t.Fatalf("kill %d: u%d = %v, never acknowledged (%d new keys were)", k, i, v, n)
		}
	}
	if vals[n] != nil {
		n++
	}
	return n
}

// counter is the integer at key (0 if there is none).
func counter(t *testing.T, k int, c *goredis.Client, key string) int {
	n, err := c.Get(context.Background(), key).Int()
	if err != nil && err != goredis.Nil {
		t.Fatalf("kill %d: GET %s: %v", k, key, err)
	}
	return n
}

// write is the kill test's client: SETs of w0..w19 counting up, a SET of
// a new key u<n> to n, MULTI INCR m1 INCR m2, and every other round a MULTI pushing the next number into
// a list, a hash, a sorted set and a set; st records each acknowledged
// write. It closes ready after rounds rounds (at once if 0) and returns
// the error that stopped it (the kill's, normally).
func (st *killState) write(ctx context.Context, c *goredis.Client, rounds int, ready chan struct{}) error {
	for i := 0; ; i++ {
		if i == rounds {
			close(ready)
		}
		key := "w" + strconv.Itoa(rand.IntN(20))
		v := st.acked[key] + 1
		if _, err := c.Set(ctx, key, v, 0).Result(); err != nil {
			return err
		}
		st.acked[key] = v
		if err := c.Set(ctx, "u"+strconv.Itoa(st.fresh), st.fresh, 0).Err(); err != nil {
			return err
		}
		st.fresh++
		_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Incr(ctx, "m1")
			p.Incr(ctx, "m2")
			return nil
		})
		if err != nil {
			return err
		}
		st.multis++
		if i%2 == 0 {
			continue
		}
		n := st.pushed
		_, err = c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.RPush(ctx, "q", n)
			p.HSet(ctx, "h", "f"+strconv.Itoa(n), n)
			p.ZAdd(ctx, "z", goredis.Z{Score: float64(n), Member: "m" + strconv.Itoa(n)})
			p.SAdd(ctx, "s", "m"+strconv.Itoa(n))
			return nil
		})
		if err != nil {
			return err
		}
		st.pushed = n + 1
	}
}

// checkColls checks the collections the kill test pushes to in one MULTI
// (a list, a hash, a sorted set and a set: quicklist, listpack then
// hashtable, listpack then skiplist, hashtable): all four hold the same n
// elements, n is the acknowledged count or one more, and the list is
// 0..n-1 in order. It returns n.
func checkColls(t *testing.T, k int, c *goredis.Client, acked int) int {
	ctx := context.Background()
	pipe := c.Pipeline()
	ln, hn, zn, sn, all := pipe.LLen(ctx, "q"), pipe.HLen(ctx, "h"), pipe.ZCard(ctx, "z"), pipe.SCard(ctx, "s"), pipe.LRange(ctx, "q", 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("kill %d: reading the collections: %v", k, err)
	}
	n := int(ln.Val())
	if n != acked && n != acked+1 {
		t.Fatalf("kill %d: list has %d elements, %d pushes acknowledged", k, n, acked)
	}
	if h, z, s := hn.Val(), zn.Val(), sn.Val(); h != int64(n) || z != int64(n) || s != int64(n) {
		t.Fatalf("kill %d: partial MULTI: list %d, hash %d, zset %d, set %d", k, n, h, z, s)
	}
	for i, v := range all.Val() {
		if v != strconv.Itoa(i) {
			t.Fatalf("kill %d: q[%d] = %s", k, i, v)
		}
	}
	if n > 0 {
		mid := "m" + strconv.Itoa(n/2)
		if r, err := c.ZRank(ctx, "z", mid).Result(); err != nil || r != int64(n/2) {
			t.Fatalf("kill %d: ZRANK %s = %d (%v)", k, mid, r, err)
		}
		if v, err := c.HGet(ctx, "h", "f"+strconv.Itoa(n-1)).Result(); err != nil || v != strconv.Itoa(n-1) {
			t.Fatalf("kill %d: h[f%d] = %q (%v)", k, n-1, v, err)
		}
	}
	return n
}

// tmpDir is under /dev/shm when there is one: pools on tmpfs run in pmem
// mode; msync on a busy shared disk would make the tests slow.
func tmpDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "engram-redis-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ownServer starts the built server bin with args on a free port and
// returns it, a client that does not retry and the port, once the server
// answering there is this process (INFO server's process_id). The kill
// tests restart a server hundreds of times, and between a kill and the
// restart's bind (the pool's open and recovery: most of each cycle under
// load) its port is free; another test's server on this shared machine
// may bind it meanwhile (its port also comes from bind(0)). The restarted
// server then fails to bind and exits, and the test used to check the
// other server's keys: with another kill test's server (wal, after a
// kill, the same key names) that reads as a lost acknowledged write
// (TestOwnServerRefusesForeign shows the old start doing exactly that).
// So every start takes a new port, and a start whose process exits or
// whose port answers with another pid is retried on another.
func ownServer(t *testing.T, bin string, args ...string) (*exec.Cmd, *goredis.Client, int) {
	t.Helper()
	return ownServerEnv(t, nil, bin, args...)
}

// ownServerEnv is ownServer with env added to the server's environment.
func ownServerEnv(t *testing.T, env []string, bin string, args ...string) (*exec.Cmd, *goredis.Client, int) {
	t.Helper()
	for try := 0; try < 10; try++ {
		port := freePort(t)
		if cmd, c := startOwnedEnv(t, env, bin, port, args); c != nil {
			return cmd, c, port
		}
	}
	t.Fatal("the server did not come up as itself on any of 10 ports")
	return nil, nil, 0
}

// startOwned starts bin on port; nil client if another process answers
// there or bin exited (its own process is then killed and reaped).
func startOwned(t *testing.T, bin string, port int, args []string) (*exec.Cmd, *goredis.Client) {
	t.Helper()
	return startOwnedEnv(t, nil, bin, port, args)
}

// serverCmd is the command that starts bin on port with args and env added
// to the environment; its stderr is kept (serverStderr).
func serverCmd(env []string, bin string, port int, args []string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = new(bytes.Buffer)
	return cmd
}

// serverStderr is what an exited server (serverCmd) wrote to stderr, as a
// suffix for a failure message (the server is killed first if it runs).
func serverStderr(cmd *exec.Cmd) string {
	cmd.Process.Kill()
	cmd.Wait()
	if b, ok := cmd.Stderr.(*bytes.Buffer); ok && b.Len() > 0 {
		return "; the server's stderr:\n" + b.String()
	}
	return ""
}

// startOwnedEnv is startOwned with env added to the server's environment.
func startOwnedEnv(t *testing.T, env []string, bin string, port int, args []string) (*exec.Cmd, *goredis.Client) {
	t.Helper()
	cmd := serverCmd(env, bin, port, args)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A test that fails between a start and its own kill (t.Fatalf in a
	// kill loop) must not leave the server running; a second kill of an
	// exited process is a no-op (an error nobody needs).
	t.Cleanup(func() { cmd.Process.Kill() })
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Minute})
	for i := 0; i < 1500; i++ {
		if exited(cmd.Process.Pid) {
			break
		}
		info, err := c.Info(context.Background(), "server").Result()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
			return cmd, c
		}
		t.Logf("port %d answers as another server (%s), not pid %d: retrying on another port", port, infoFields(info, "process_id", "tcp_port"), cmd.Process.Pid)
		break
	}
	c.Close()
	if exited(cmd.Process.Pid) {
		t.Logf("the server on port %d exited%s", port, serverStderr(cmd))
	}
	cmd.Process.Kill()
	cmd.Wait()
	return cmd, nil
}

// infoFields is the named fields of an INFO reply, "name:value ...".
func infoFields(info string, names ...string) string {
	var out []string
	for _, line := range strings.Split(info, "\r\n") {
		for _, n := range names {
			if strings.HasPrefix(line, n+":") {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, " ")
}

// exited is whether child pid has exited (a zombie not yet reaped, or
// gone); false where there is no /proc (then only the pid check guards).
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		_, self := os.Stat("/proc/self/stat")
		return self == nil
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

func waitUp(t *testing.T, c *goredis.Client) {
	for i := 0; i < 500; i++ {
		if c.Ping(context.Background()).Err() == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(fmt.Sprint("server did not come up"))
}
