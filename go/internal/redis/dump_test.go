// dump_test.go: DUMP/RESTORE. The CRC is checked against Redis's test
// vector; values of every type and encoding (small and big, integers,
// LZF-compressible strings) are DUMPed by Debian's redis-server 7.0 and
// RESTOREd here, and DUMPed here and RESTOREd there; the contents must
// match. Bad payloads are refused with Redis's errors.
package redis

import (
	"encoding/binary"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCRC64Jones(t *testing.T) {
	if got := crc64Jones(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64 = %#x", got)
	}
}

// rawBulk reads a bulk reply's raw bytes (DUMP payloads are binary).
func rawDump(t *testing.T, c *rawClient, k string) string {
	r := c.do([]string{"DUMP", k})
	if !strings.HasPrefix(r, "$") {
		t.Fatalf("DUMP %s: %s", k, r)
	}
	return r[1:]
}

// fill writes the same values through c: every type, small and big.
func fill(c *rawClient) {
	big := func(n int, f func(i int) []string) {
		for i := 0; i < n; i += 50 {
			var args []string
			for j := i; j < min(n, i+50); j++ {
				args = append(args, f(j)...)
			}
			c.do(args)
		}
	}
	c.do([]string{"SET", "s-int", "12345"})
	c.do([]string{"SET", "s-neg", "-70000"})
	c.do([]string{"SET", "s-raw", "hello world"})
	c.do([]string{"SET", "s-lzf", strings.Repeat("abcdefgh", 40)})
	c.do([]string{"RPUSH", "l-small", "a", "1", "-300", "70000", strings.Repeat("x", 70)})
	big(3000, func(i int) []string {
		if i%50 == 0 {
			return []string{"RPUSH", "l-big", strconv.Itoa(i)}
		}
		return []string{"e" + strconv.Itoa(i*7)}
	})
	c.do([]string{"SADD", "set-int", "1", "-5", "100000", "3000000000"})
	c.do([]string{"SADD", "set-str", "a", "b", "c"})
	c.do([]string{"HSET", "h-small", "f1", "v1", "f2", "22", "f3", "-9000"})
	big(800, func(i int) []string {
		if i%50 == 0 {
			return []string{"HSET", "h-big", "f" + strconv.Itoa(i), strconv.Itoa(i)}
		}
		return []string{"f" + strconv.Itoa(i), "v" + strconv.Itoa(i)}
	})
	c.do([]string{"ZADD", "z-small", "1.5", "a", "-2", "b", "100", "c", "inf", "d"})
	big(500, func(i int) []string {
		if i%50 == 0 {
			return []string{"ZADD", "z-big", strconv.Itoa(i % 37), "m" + strconv.Itoa(i)}
		}
		return []string{strconv.FormatFloat(float64(i)/3, 'g', -1, 64), "m" + strconv.Itoa(i)}
	})
}

var dumpKeys = []string{"s-int", "s-neg", "s-raw", "s-lzf", "l-small", "l-big", "set-int", "set-str", "h-small", "h-big", "z-small", "z-big"}

func contents(c *rawClient, k string) string {
	switch strings.TrimPrefix(c.do([]string{"TYPE", k}), "+") {
	case "string":
		return c.do([]string{"GET", k})
	case "list":
		return c.do([]string{"LRANGE", k, "0", "-1"})
	case "set":
		return c.do([]string{"SMEMBERS", k})
	case "hash":
		return c.do([]string{"HGETALL", k})
	case "zset":
		return c.do([]string{"ZRANGE", k, "0", "-1", "WITHSCORES"})
	}
	return "none"
}

func TestDumpRestoreInterop(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	port, dir := freePort(t), tmpDir(t)
	rs := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { rs.Process.Kill(); rs.Wait() }()
	s, _ := start(t, filepath.Join(dir, "d.pool"), 0)
	var real *rawClient
	for i := 0; i < 200 && real == nil; i++ {
		time.Sleep(25 * time.Millisecond)
		if c, err := exec.Command("redis-cli", "-p", strconv.Itoa(port), "ping").Output(); err == nil && strings.TrimSpace(string(c)) == "PONG" {
			real = dialRaw(t, "127.0.0.1:"+strconv.Itoa(port))
		}
	}
	if real == nil {
		t.Fatal("redis-server did not start")
	}
	ours := dialRaw(t, s.Addr())
	real.do([]string{"FLUSHALL"})
	fill(real)
	fill(ours)
	for _, k := range dumpKeys {
		want := contents(real, k)
		// redis-server -> engram-redis
		if r := ours.do([]string{"RESTORE", "from-real", "0", rawDump(t, real, k), "REPLACE"}); r != "+OK" {
			t.Fatalf("RESTORE of redis-server's DUMP of %s: %s", k, r)
		}
		if got := contents(ours, "from-real"); got != want {
			t.Fatalf("%s restored here:\n got %s\nwant %s", k, got, want)
		}
		// engram-redis -> redis-server
		if r := real.do([]string{"RESTORE", "from-ours", "0", rawDump(t, ours, k), "REPLACE"}); r != "+OK" {
			t.Fatalf("redis-server RESTORE of our DUMP of %s: %s", k, r)
		}
		if got := contents(real, "from-ours"); got != want {
			t.Fatalf("%s restored by redis-server:\n got %s\nwant %s", k, got, want)
		}
	}
	// TTLs, BUSYKEY, bad payloads.
	p := rawDump(t, ours, "s-raw")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"RESTORE", "s-raw", "0", p}, "-BUSYKEY Target key"},
		{[]string{"RESTORE", "t1", "5000", p}, "+OK"},
		{[]string{"RESTORE", "t2", "-1", p}, "-ERR Invalid TTL"},
		{[]string{"RESTORE", "t3", "0", p[:len(p)-1] + "x"}, "-ERR DUMP payload"},
		{[]string{"RESTORE", "t4", "0", "short"}, "-ERR DUMP payload"},
		{[]string{"RESTORE", "t5", "1", p, "ABSTTL"}, "+OK"},
		{[]string{"EXISTS", "t5"}, ":0"},
		{[]string{"DUMP", "nosuchkey"}, "nil"},
	} {
		for _, srv := range []*rawClient{real, ours} {
			if got := srv.do(c.args); got != c.want {
				t.Fatalf("%q: %s (want %s)", c.args, got, c.want)
			}
		}
	}
	if ttl, _ := strconv.Atoi(strings.TrimPrefix(ours.do([]string{"PTTL", "t1"}), ":")); ttl <= 0 || ttl > 5000 {
		t.Fatalf("PTTL after RESTORE 5000: %d", ttl)
	}
}

// TestRestoreGarbage: random and mutated payloads with a valid footer are
// refused (or restored) without harming the server.
func TestRestoreGarbage(t *testing.T) {
	s, _ := start(t, filepath.Join(tmpDir(t), "g.pool"), 0)
	c := dialRaw(t, s.Addr())
	fill(c)
	r := rand.New(rand.NewPCG(7, 7))
	seeds := []string{}
	for _, k := range dumpKeys {
		p := rawDump(t, c, k)
		seeds = append(seeds, p[:len(p)-10])
	}
	for i := 0; i < 2000; i++ {
		body := []byte(seeds[r.IntN(len(seeds))])
		for j := 0; j < 1+r.IntN(4); j++ {
			switch r.IntN(3) {
			case 0:
				body[r.IntN(len(body))] = byte(r.IntN(256))
			case 1:
				body = body[:r.IntN(len(body))+1]
			default:
				body = append(body, byte(r.IntN(256)))
			}
		}
		p := binary.LittleEndian.AppendUint16(body, rdbVersion)
		p = binary.LittleEndian.AppendUint64(p, crc64Jones(0, p))
		got := c.do([]string{"RESTORE", "g", "0", string(p), "REPLACE"})
		if got != "+OK" && got != "-ERR Bad data" {
			t.Fatalf("payload %d: %s", i, got)
		}
	}
	if got := c.do([]string{"PING"}); got != "+PONG" {
		t.Fatal(got)
	}
}
