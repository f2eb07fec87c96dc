// evloop_test.go: the epoll front end (evloop_linux.go) and its parser
// (respscan.go): commands split at every byte, many pipelining
// connections, a client closing mid-pipeline, CLIENT KILL and QUIT (the
// connection leaves the loop), a client blocked on one loop served by a
// push from another, a client that does not read its replies (the others
// are served meanwhile), and the same checks on `--io goroutines`.
package redis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestScanCommands: every split of a pipeline into two reads gives, with
// parseOne, the commands written (the inline ones too).
func TestScanCommands(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pipe bytes.Buffer
	var want [][]string
	for i := 0; i < 40; i++ {
		var args []string
		for j := 0; j < 1+rng.IntN(4); j++ {
			args = append(args, strings.Repeat(string(rune('a'+j)), rng.IntN(30)))
		}
		if i%7 == 3 {
			pipe.WriteString(strings.Join([]string{"PING", "x"}, " ") + "\r\n")
			want = append(want, []string{"PING", "x"})
			continue
		}
		fmt.Fprintf(&pipe, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&pipe, "$%d\r\n%s\r\n", len(a), a)
		}
		want = append(want, args)
	}
	all := pipe.Bytes()
	for cut := 0; cut <= len(all); cut++ {
		got := framedParse(t, all, cut)
		if len(got) != len(want) {
			t.Fatalf("cut %d: %d commands, want %d", cut, len(got), len(want))
		}
		for i := range want {
			if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
				t.Fatalf("cut %d, command %d: %q want %q", cut, i, got[i], want[i])
			}
		}
	}
}

// parseAll parses b with parseOne as the loop does: the commands, the
// bytes taken, and the length the rest needs (0: none left).
func parseAll(b []byte) ([][]string, int, int, error) {
	var out [][]string
	var a argArena
	var offs []argSpan
	pos := 0
	for pos < len(b) {
		args, n, ok, need, o, err := parseOne(b[pos:], &a, offs)
		offs = o
		if err != nil {
			return out, pos, 0, err
		}
		if !ok {
			return out, pos, pos + need, nil
		}
		pos += n
		if len(args) > 0 {
			var s []string
			for _, x := range args {
				s = append(s, string(x))
			}
			out = append(out, s)
		}
	}
	return out, pos, 0, nil
}

// framedParse parses all[:cut], then what was left plus the rest of all,
// as the loop does across two reads.
func framedParse(t *testing.T, all []byte, cut int) [][]string {
	out, p, need, err := parseAll(all[:cut])
	if err != nil || (p < cut) != (need > cut) {
		t.Fatalf("cut %d: taken %d, need %d, %v", cut, p, need, err)
	}
	more, p2, need2, err := parseAll(all[p:])
	if err != nil || p2 != len(all)-p || need2 != 0 {
		t.Fatalf("cut %d: the whole rest is not parsed (%d of %d, %v)", cut, p2, len(all)-p, err)
	}
	return append(out, more...)
}

// TestScanMalformed: malformed input gets the bufio parser's protocol
// error (never a wait for more bytes), a partial command says how much it
// needs.
func TestScanMalformed(t *testing.T) {
	for _, in := range []string{"*x\r\n$1\r\n", "*1\r\n$1099511627776\r\n", "*2\r\n$3\r\nGET\r\n:12\r\nzz",
		"*1\r\n$-5\r\n", "*1\r\n$3\r\nabcd\r\n", "SET \"a\r\n", "*1\r\n\r\n", "*3000000\r\n",
		strings.Repeat("a", maxInline+1) + "\r\n", strings.Repeat("a", maxInline+20<<10)} {
		_, _, _, err := parseAll([]byte(in))
		_, want := readCommand(bufio.NewReaderSize(strings.NewReader(in), 8<<10))
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Fatalf("%.40q: %v, the bufio parser: %v", in, err, want)
		}
	}
	if _, p, need, err := parseAll([]byte("*1\r\n$5\r\nab")); p != 0 || need != 4+4+7 || err != nil {
		t.Fatalf("partial bulk: %d %d %v", p, need, err)
	}
}

func startIO(t *testing.T, io string, loops int) (*Server, *goredis.Client) {
	t.Helper()
	return startCfg(t, Config{Addr: "127.0.0.1:0", Pool: filepath.Join(tmpDir(t), "r.pool"), IO: io, IOLoops: loops})
}

var ioModes = []struct {
	name  string
	io    string
	loops int
}{{"epoll1", "epoll", 1}, {"epoll2", "epoll", 2}, {"goroutines", "goroutines", 0}}

// TestFrontEnds runs the front-end checks on every mode.
func TestFrontEnds(t *testing.T) {
	for _, m := range ioModes {
		t.Run(m.name, func(t *testing.T) {
			s, c := startIO(t, m.io, m.loops)
			if got := s.ioMode(); got != m.io {
				t.Fatalf("mode %s, want %s", got, m.io)
			}
			t.Run("pipelines", func(t *testing.T) { checkPipelines(t, s.Addr()) })
			t.Run("split", func(t *testing.T) { checkSplit(t, s.Addr()) })
			t.Run("midPipeline", func(t *testing.T) { checkMidPipeline(t, s, c) })
			t.Run("kill", func(t *testing.T) { checkKillQuit(t, s, c) })
			t.Run("blocked", func(t *testing.T) { checkBlockedAcross(t, s.Addr()) })
			t.Run("slowReader", func(t *testing.T) { checkSlowReader(t, s.Addr(), c) })
		})
	}
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	cn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cn.SetDeadline(time.Now().Add(time.Minute))
	t.Cleanup(func() { cn.Close() })
	return cn, bufio.NewReader(cn)
}

func line(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	l, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read reply: %v (%q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

// checkPipelines: 100 connections each pipeline 50 INCRs of their own key
// and of a shared one; every reply arrives in order, the shared counter
// counts them all.
func checkPipelines(t *testing.T, addr string) {
	const conns, per = 100, 50
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cn, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer cn.Close()
			cn.SetDeadline(time.Now().Add(time.Minute))
			var b bytes.Buffer
			for j := 0; j < per; j++ {
				fmt.Fprintf(&b, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\nINCR shared\r\n", len("k"+strconv.Itoa(i)), "k"+strconv.Itoa(i))
			}
			if _, err := cn.Write(b.Bytes()); err != nil {
				errs <- err
				return
			}
			r := bufio.NewReader(cn)
			for j := 0; j < per; j++ {
				l1, err1 := r.ReadString('\n')
				_, err2 := r.ReadString('\n')
				if err1 != nil || err2 != nil || l1 != ":"+strconv.Itoa(j+1)+"\r\n" {
					errs <- fmt.Errorf("conn %d reply %d: %q %v %v", i, j, l1, err1, err2)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cn, r := dial(t, addr)
	cn.Write([]byte("GET shared\r\n"))
	line(t, r)
	if v := line(t, r); v != strconv.Itoa(conns*per) {
		t.Fatalf("shared = %s, want %d", v, conns*per)
	}
}

// checkSplit: a pipeline written a few bytes at a time (each piece its own
// read on the server) is answered whole and in order.
func checkSplit(t *testing.T, addr string) {
	cn, r := dial(t, addr)
	val := strings.Repeat("v", 100<<10) // larger than one read
	cmds := "*3\r\n$3\r\nSET\r\n$5\r\nsplit\r\n$" + strconv.Itoa(len(val)) + "\r\n" + val + "\r\n" +
		"*2\r\n$6\r\nSTRLEN\r\n$5\r\nsplit\r\nPING\r\n"
	for i := 0; i < len(cmds); {
		n := min(1+i%7, len(cmds)-i)
		if i > 200 && i < len(cmds)-200 {
			n = min(30<<10, len(cmds)-i)
		}
		if _, err := cn.Write([]byte(cmds[i : i+n])); err != nil {
			t.Fatal(err)
		}
		i += n
		time.Sleep(time.Millisecond)
	}
	for _, want := range []string{"+OK", ":" + strconv.Itoa(len(val)), "+PONG"} {
		if got := line(t, r); got != want {
			t.Fatalf("got %q want %q", got, want)
		}
	}
}

// tracked tells whether the server still tracks connection id.
func tracked(s *Server, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id] != nil
}

// waitGone waits until the server no longer tracks connection id (other
// tests' connections may still be closing: counts would race them).
func waitGone(t *testing.T, s *Server, id int64) {
	t.Helper()
	for i := 0; i < 2000 && tracked(s, id); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if tracked(s, id) {
		t.Fatalf("connection %d still tracked", id)
	}
}

// clientID asks the connection for its id.
func clientID(t *testing.T, cn net.Conn, r *bufio.Reader) int64 {
	t.Helper()
	cn.Write([]byte("CLIENT ID\r\n"))
	id, err := strconv.ParseInt(strings.TrimPrefix(line(t, r), ":"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// checkMidPipeline: a client that closes with a command half sent has its
// whole commands run, the half one dropped, and leaves the server.
func checkMidPipeline(t *testing.T, s *Server, c *goredis.Client) {
	ctx := context.Background()
	cn, r := dial(t, s.Addr())
	id := clientID(t, cn, r)
	cn.Write([]byte("*3\r\n$3\r\nSET\r\n$2\r\nmp\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$2\r\nmq\r\n$5\r\nab"))
	cn.Close()
	waitGone(t, s, id)
	if v := c.Get(ctx, "mp").Val(); v != "1" {
		t.Fatalf("the whole command before the close did not run: %q", v)
	}
	if n := m(c.Exists(ctx, "mq").Result()); n != 0 {
		t.Fatal("half a command ran")
	}
}

// checkKillQuit: CLIENT KILL and QUIT end the connection (the client
// reads EOF after QUIT's +OK) and the server stops tracking it.
func checkKillQuit(t *testing.T, s *Server, c *goredis.Client) {
	ctx := context.Background()
	victim, vr := dial(t, s.Addr())
	id := clientID(t, victim, vr)
	if n := m(c.Do(ctx, "client", "kill", "id", strconv.FormatInt(id, 10)).Int()); n != 1 {
		t.Fatalf("killed %d", n)
	}
	if _, err := vr.ReadString('\n'); err == nil {
		t.Fatal("killed client still open")
	}
	waitGone(t, s, id)
	q, qr := dial(t, s.Addr())
	qid := clientID(t, q, qr)
	q.Write([]byte("QUIT\r\n"))
	if l := line(t, qr); l != "+OK" {
		t.Fatal(l)
	}
	if _, err := qr.ReadString('\n'); err == nil {
		t.Fatal("open after QUIT")
	}
	waitGone(t, s, qid)
}

// checkBlockedAcross: a BLPOP on one connection is served by an LPUSH on
// another (with two loops, the connections are on different loops: ids
// of different parity), and a BLPOP with a timeout times out.
func checkBlockedAcross(t *testing.T, addr string) {
	a, ar := dial(t, addr)
	b, br := dial(t, addr)
	a.Write([]byte("CLIENT ID\r\n"))
	b.Write([]byte("CLIENT ID\r\n"))
	ida, _ := strconv.Atoi(strings.TrimPrefix(line(t, ar), ":"))
	idb, _ := strconv.Atoi(strings.TrimPrefix(line(t, br), ":"))
	if ida%2 == idb%2 {
		t.Fatalf("ids %d and %d", ida, idb)
	}
	a.Write([]byte("BLPOP across 0\r\n"))
	time.Sleep(20 * time.Millisecond) // not needed for correctness: lets the BLPOP block first
	b.Write([]byte("RPUSH across x\r\n"))
	if l := line(t, br); l != ":1" && l != ":0" {
		t.Fatal(l)
	}
	for _, want := range []string{"*2", "$6", "across", "$1", "x"} {
		if l := line(t, ar); l != want {
			t.Fatalf("BLPOP reply %q want %q", l, want)
		}
	}
	a.Write([]byte("BLPOP nothing 0.05\r\nPING\r\n"))
	for _, want := range []string{"*-1", "+PONG"} {
		if l := line(t, ar); l != want {
			t.Fatalf("timed-out BLPOP: %q want %q", l, want)
		}
	}
}

// checkSlowReader: a client asks for 32 MiB of replies and reads none of
// them; another client is served meanwhile (the server keeps the backlog
// instead of waiting on the socket), then the first reads every reply
// whole.
func checkSlowReader(t *testing.T, addr string, c *goredis.Client) {
	ctx := context.Background()
	big := strings.Repeat("b", 1<<20)
	m(c.Set(ctx, "big", big, 0).Result())
	slow, sr := dial(t, addr)
	const n = 32
	slow.Write([]byte(strings.Repeat("GET big\r\n", n)))
	for i := 0; i < 50; i++ {
		k := "other" + strconv.Itoa(i)
		m(c.Set(ctx, k, "v", 0).Result())
		if v := m(c.Get(ctx, k).Result()); v != "v" {
			t.Fatal(v)
		}
	}
	for i := 0; i < n; i++ {
		if l := line(t, sr); l != "$"+strconv.Itoa(len(big)) {
			t.Fatalf("reply %d: %q", i, l)
		}
		buf := make([]byte, len(big)+2)
		if _, err := io.ReadFull(sr, buf); err != nil || string(buf[:len(big)]) != big {
			t.Fatalf("reply %d: %v", i, err)
		}
	}
}
