// diff_test.go: differential test. Random command streams go to
// engram-redis and to a real redis-server (Debian's, on another free port,
// persistence off); the replies are compared one by one (replies whose
// order Redis leaves undefined — SMEMBERS, KEYS, HGETALL of big hashes —
// are compared sorted). Skipped when redis-server is not installed.
package redis

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawClient sends RESP commands and reads one reply as a canonical string.
type rawClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &rawClient{c, bufio.NewReader(c)}
}

func (rc *rawClient) do(args []string) string {
	rc.send(args)
	return rc.read(strings.ToLower(args[0]))
}

// send writes a command without reading its reply (a deferred client).
func (rc *rawClient) send(args []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	rc.c.Write([]byte(b.String()))
}

var unordered = map[string]bool{"smembers": true, "keys": true, "sunion": true, "sinter": true, "sdiff": true, "hkeys": true, "hvals": true, "hgetall": true}

func (rc *rawClient) read(cmd string) string {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return "EOF"
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "nil"
		}
		buf := make([]byte, n+2)
		_, _ = ioReadFullR(rc.r, buf)
		if v := string(buf[:n]); cmd == "object" && (v == "int" || v == "embstr" || v == "raw") {
			return "$string" // Redis's string encoding depends on history (APPEND makes raw)
		}
		return "$" + string(buf[:n])
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "nilarray"
		}
		items := make([]string, n)
		for i := range items {
			items[i] = rc.read("")
		}
		if unordered[cmd] {
			sort.Strings(items)
		}
		return "[" + strings.Join(items, ",") + "]"
	case '-':
		// Compare the error's class and first words only.
		w := strings.Fields(line)
		if len(w) > 3 {
			w = w[:3]
		}
		return strings.Join(w, " ")
	}
	return line
}

func ioReadFullR(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// diffShape: how many keys the commands use and how far indexes reach.
type diffShape struct{ keys, span, members int }

var smallShape = diffShape{keys: 8, span: 5, members: 10}

// bigCommand grows collections to thousands of elements: each type has
// its own two keys, writes add several members at once, and reads and
// removals reach anywhere in the value.
func bigCommand(r *rand.Rand, sh diffShape) []string {
	k := func(p string) string { return p + strconv.Itoa(r.IntN(2)) }
	m := func() string { return "m" + strconv.Itoa(r.IntN(sh.members)) }
	i := func() string { return strconv.Itoa(r.IntN(2*sh.span) - sh.span) }
	sc := func() string { return strconv.Itoa(r.IntN(sh.members / 4)) }
	many := func(pre []string, per func() []string) []string {
		for j := 0; j < 20; j++ {
			pre = append(pre, per()...)
		}
		return pre
	}
	cmds := [][]string{
		many([]string{"RPUSH", k("L")}, func() []string { return []string{m()} }),
		many([]string{"LPUSH", k("L")}, func() []string { return []string{m()} }),
		{"LPOP", k("L"), "3"}, {"RPOP", k("L")}, {"LRANGE", k("L"), i(), i()}, {"LINDEX", k("L"), i()},
		{"LSET", k("L"), i(), m()}, {"LLEN", k("L")}, {"LINSERT", k("L"), "AFTER", m(), m()}, {"LREM", k("L"), "1", m()},
		{"LTRIM", k("L"), "0", strconv.Itoa(r.IntN(4000))}, {"RPOPLPUSH", k("L"), k("L")}, {"LPOS", k("L"), m()},
		many([]string{"HSET", k("H")}, func() []string { return []string{m(), m()} }),
		{"HGET", k("H"), m()}, {"HDEL", k("H"), m(), m()}, {"HLEN", k("H")}, {"HINCRBY", k("H"), m(), "3"},
		{"HEXISTS", k("H"), m()}, {"HGETALL", k("H")}, {"OBJECT", "ENCODING", k("H")},
		many([]string{"SADD", k("S")}, func() []string { return []string{m()} }),
		{"SREM", k("S"), m(), m()}, {"SCARD", k("S")}, {"SISMEMBER", k("S"), m()}, {"SMEMBERS", k("S")},
		{"SMOVE", k("S"), k("S"), m()}, {"SINTER", "S0", "S1"}, {"OBJECT", "ENCODING", k("S")},
		many([]string{"ZADD", k("Z")}, func() []string { return []string{sc(), m()} }),
		many([]string{"ZADD", k("Z")}, func() []string { return []string{sc(), m()} }),
		many([]string{"ZADD", k("Z"), "CH"}, func() []string { return []string{sc(), m()} }),
		{"ZREM", k("Z"), m(), m()}, {"ZSCORE", k("Z"), m()}, {"ZRANK", k("Z"), m()}, {"ZREVRANK", k("Z"), m()},
		{"ZRANGE", k("Z"), i(), i(), "WITHSCORES"}, {"ZRANGE", k("Z"), i(), i(), "REV"}, {"ZCARD", k("Z")},
		{"ZRANGE", k("Z"), sc(), sc(), "BYSCORE", "LIMIT", "3", "5"}, {"ZRANGE", k("Z"), sc(), "(" + sc(), "BYSCORE", "REV", "LIMIT", "2", "4"},
		{"ZCOUNT", k("Z"), sc(), sc()}, {"ZINCRBY", k("Z"), "2", m()}, {"ZPOPMIN", k("Z"), "2"}, {"ZPOPMAX", k("Z")},
		{"ZREMRANGEBYRANK", k("Z"), i(), i()}, {"ZREMRANGEBYSCORE", k("Z"), sc(), sc()}, {"OBJECT", "ENCODING", k("Z")},
	}
	return cmds[r.IntN(len(cmds))]
}

func randomCommand(r *rand.Rand, sh diffShape) []string {
	if sh.keys == 0 {
		return bigCommand(r, sh)
	}
	key := func() string { return "k" + strconv.Itoa(r.IntN(sh.keys)) }
	val := func() string {
		switch r.IntN(12) {
		case 0, 1, 2, 3:
			return strconv.Itoa(r.IntN(100) - 20)
		case 4:
			return strings.Repeat("w", 60+r.IntN(10)) // about Redis's 64-byte listpack value limit
		}
		return "v" + strconv.Itoa(r.IntN(sh.members))
	}
	lex := func() string { // a ZRANGE BYLEX bound
		switch r.IntN(6) {
		case 0:
			return "-"
		case 1:
			return "+"
		case 2:
			return "(v" + strconv.Itoa(r.IntN(10))
		}
		return "[v" + strconv.Itoa(r.IntN(10))
	}
	lim := func() string { return strconv.Itoa(r.IntN(4) - 1) }
	idx := func() string { return strconv.Itoa(r.IntN(2*sh.span) - sh.span) }
	score := func() string { return strconv.Itoa(r.IntN(sh.members)) }
	cmds := [][]string{
		{"SET", key(), val()}, {"GET", key()}, {"SETNX", key(), val()}, {"GETSET", key(), val()},
		{"INCR", key()}, {"DECRBY", key(), val()}, {"APPEND", key(), val()}, {"STRLEN", key()},
		{"GETRANGE", key(), idx(), idx()}, {"MGET", key(), key()}, {"MSET", key(), val(), key(), val()},
		{"DEL", key()}, {"EXISTS", key(), key()}, {"TYPE", key()}, {"GETDEL", key()},
		{"LPUSH", key(), val(), val()}, {"RPUSH", key(), val()}, {"LPOP", key()}, {"RPOP", key(), "2"},
		{"LRANGE", key(), idx(), idx()}, {"LLEN", key()}, {"LINDEX", key(), idx()}, {"LREM", key(), idx(), val()},
		{"LTRIM", key(), idx(), idx()}, {"LSET", key(), idx(), val()}, {"LINSERT", key(), "BEFORE", val(), val()},
		{"RPOPLPUSH", key(), key()},
		{"HSET", key(), val(), val()}, {"HGET", key(), val()}, {"HDEL", key(), val()}, {"HLEN", key()},
		{"HGETALL", key()}, {"HINCRBY", key(), val(), idx()}, {"HEXISTS", key(), val()}, {"HMGET", key(), val(), val()},
		{"SADD", key(), val(), val()}, {"SREM", key(), val()}, {"SCARD", key()}, {"SISMEMBER", key(), val()},
		{"SMEMBERS", key()}, {"SINTER", key(), key()}, {"SUNIONSTORE", key(), key(), key()}, {"SMOVE", key(), key(), val()},
		{"ZADD", key(), score(), val()}, {"ZADD", key(), "XX", "CH", score(), val()}, {"ZSCORE", key(), val()},
		{"ZRANGE", key(), idx(), idx(), "WITHSCORES"}, {"ZREM", key(), val()}, {"ZCARD", key()}, {"ZRANK", key(), val()},
		{"ZINCRBY", key(), score(), val()}, {"ZRANGEBYSCORE", key(), "(" + score(), "+inf"}, {"ZCOUNT", key(), score(), score()},
		{"ZPOPMIN", key()}, {"ZREVRANGE", key(), "0", "-1"},
		{"EXPIRE", key(), "100"}, {"TTL", key()}, {"PERSIST", key()}, {"RENAME", key(), key()},
		{"LMPOP", "2", key(), key(), "RIGHT", "COUNT", "2"}, {"ZMPOP", "2", key(), key(), "MIN", "COUNT", "2"},
		{"ZMPOP", "1", key(), "MAX"}, {"BZPOPMIN", key(), key(), "0.01"}, {"BZMPOP", "0.01", "1", key(), "MAX", "COUNT", "3"}, {"LPOS", key(), val()}, {"LPOS", key(), val(), "RANK", "-1", "COUNT", "0"},
		// (ZRANGEBYLEX/ZLEXCOUNT are left out: with different scores Redis
		// leaves the result unspecified.)
		{"ZUNIONSTORE", key(), "2", key(), key()}, {"ZINTERSTORE", key(), "2", key(), key(), "AGGREGATE", "MAX"},
		{"ZUNION", "2", key(), key(), "WITHSCORES"}, {"ZDIFF", "2", key(), key()}, {"ZDIFFSTORE", key(), "2", key(), key()},
		{"ZRANGESTORE", key(), key(), "0", "-1"},
		// Lex ranges on "lex", whose members all have score 0 (Redis leaves
		// lex ranges over differing scores unspecified).
		{"ZADD", "lex", "0", val(), "0", val()}, {"ZRANGE", "lex", lex(), lex(), "BYLEX"},
		{"ZRANGE", "lex", lex(), lex(), "BYLEX", "REV", "LIMIT", lim(), lim()}, {"ZRANGEBYLEX", "lex", lex(), lex(), "LIMIT", lim(), lim()},
		{"ZREVRANGEBYLEX", "lex", lex(), lex()}, {"ZLEXCOUNT", "lex", lex(), lex()}, {"ZREMRANGEBYLEX", "lex", lex(), lex()},
		{"ZRANGE", key(), score(), score(), "BYSCORE", "LIMIT", lim(), lim(), "WITHSCORES"},
		{"ZRANGE", key(), score(), "(" + score(), "BYSCORE", "REV", "LIMIT", lim(), lim()}, {"ZRANGE", key(), idx(), idx(), "REV"},
		{"ZREVRANK", key(), val()}, {"ZPOPMAX", key(), "2"}, {"ZMSCORE", key(), val(), val()},
		{"ZREMRANGEBYSCORE", key(), score(), score()}, {"ZREMRANGEBYRANK", key(), idx(), idx()}, {"ZRANGE", key(), "0", "-1", "BYLEX"},
		{"ZADD", key(), "GT", "CH", score(), val(), score(), val()}, {"ZADD", key(), "INCR", score(), val()},
		{"HSETNX", key(), val(), val()}, {"HSTRLEN", key(), val()}, {"HKEYS", key()}, {"SMISMEMBER", key(), val(), val()},
		{"LPUSHX", key(), val()}, {"RPUSH", key(), val(), val(), val()}, {"LMOVE", key(), key(), "LEFT", "RIGHT"},
		{"OBJECT", "ENCODING", key()}, {"COPY", key(), key()}, {"RENAME", key(), key()},
		{"DBSIZE"}, {"KEYS", "*"}, {"EXISTS", key()}, {"NOSUCHCMD", key()}, {"GET"},
	}
	return cmds[r.IntN(len(cmds))]
}

// TestDifferential runs with Redis's default encoding thresholds;
// TestDifferentialBigEncodings with thresholds of 1 and 2 on both servers,
// so collections turn into tables and skiplists (and OBJECT ENCODING says
// so) at once.
func TestDifferential(t *testing.T) { differential(t, smallShape, nil) }

// TestDifferentialBigValues: collections of thousands of elements (in the
// persistent structures), bigCommand's stream.
func TestDifferentialBigValues(t *testing.T) {
	differential(t, diffShape{span: 2000, members: 3000}, nil)
}

func TestDifferentialBigEncodings(t *testing.T) {
	differential(t, smallShape, []string{"CONFIG", "SET", "hash-max-listpack-entries", "2", "zset-max-listpack-entries", "1",
		"set-max-intset-entries", "2", "hash-max-listpack-value", "3", "zset-max-listpack-value", "3"})
}

func differential(t *testing.T, sh diffShape, setup []string) {
	dir := tmpDir(t)
	real := dialRaw(t, startRealRedis(t, dir))
	s, _ := start(t, dir+"/d.pool", 0)
	ours := dialRaw(t, s.Addr())
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("ENGRAM_REDIS_DIFF_SEED"), 10, 64); err == nil {
		seed = v
	}
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("ENGRAM_REDIS_DIFF_N")); err == nil {
		n = v
	}
	r := rand.New(rand.NewPCG(seed, 1))
	peak := map[string]int{}
	real.do([]string{"FLUSHALL"})
	if setup != nil {
		if a, b := real.do(setup), ours.do(setup); a != "+OK" || b != "+OK" {
			t.Fatalf("%q: redis-server %s, engram-redis %s", setup, a, b)
		}
	}
	for i := 0; i < n; i++ {
		cmd := randomCommand(r, sh)
		want, got := real.do(cmd), ours.do(cmd)
		if want != got {
			t.Fatalf("seed %d, command %d %q:\n redis-server: %s\n engram-redis: %s", seed, i, cmd, want, got)
		}
		if i%1000 == 999 {
			peakSizes(t, ours, sh, peak)
		}
	}
	t.Logf("seed %d: %d commands; largest value per type: %v", seed, n, peak)
}

// peakSizes records the largest collection of each type seen (so a run
// shows it reached the persistent structures).
func peakSizes(t *testing.T, c *rawClient, sh diffShape, peak map[string]int) {
	size := map[string]string{"list": "LLEN", "hash": "HLEN", "set": "SCARD", "zset": "ZCARD"}
	keys := []string{"L0", "L1", "H0", "H1", "S0", "S1", "Z0", "Z1"}
	for i := 0; i < sh.keys; i++ {
		keys = append(keys, "k"+strconv.Itoa(i))
	}
	for _, k := range keys {
		typ := strings.TrimPrefix(c.do([]string{"TYPE", k}), "+")
		if cmd, ok := size[typ]; ok {
			n, _ := strconv.Atoi(strings.TrimPrefix(c.do([]string{cmd, k}), ":"))
			peak[typ] = max(peak[typ], n)
		}
	}
}

// startRealRedis starts Debian's redis-server (persistence off) on a free
// port and returns its address once it accepts connections; the test is
// skipped when redis-server is not installed.
func startRealRedis(t *testing.T, dir string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	rs := exec.Command(bin, "--port", addr[len("127.0.0.1:"):], "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Process.Kill(); rs.Wait() })
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("redis-server did not start")
	return ""
}
