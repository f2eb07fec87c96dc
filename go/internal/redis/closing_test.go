// closing_test.go: a client closed by QUIT or CLIENT KILL while the
// socket holds less than its replies (a backlog, clientout.go) gets every
// reply to what it ran before the close, then EOF, and nothing it sent
// after runs (Redis's CLIENT_CLOSE_AFTER_REPLY); on both front ends.
package redis

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// closingBig is the value read back many times to build a backlog far
// beyond the socket buffers (32 MiB of replies).
const closingReads = 32

var closingBig = strings.Repeat("x", 1<<20)

// closingServer starts a server on front end io with key "big" set.
func closingServer(t *testing.T, io string) *Server {
	t.Helper()
	s, c := startCfg(t, Config{Addr: "127.0.0.1:0", Pool: filepath.Join(tmpDir(t), "c.pool"), IO: io})
	if err := c.Set(context.Background(), "big", closingBig, 0).Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

func respCmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// readToEOF reads the connection until the server closes it.
func readToEOF(t *testing.T, conn net.Conn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("after %d bytes: %v", len(b), err)
	}
	return string(b)
}

func bigReplies() string {
	return strings.Repeat(fmt.Sprintf("$%d\r\n%s\r\n", len(closingBig), closingBig), closingReads)
}

// sameReplies fails with lengths and a short prefix (the replies are MiBs).
func sameReplies(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("got %d bytes (ends %q), want %d bytes (ends %q)", len(got), got[max(0, len(got)-20):], len(want), want[max(0, len(want)-20):])
	}
}

// TestQuitAfterBacklog: GETs of a 1 MiB value, QUIT and a SET in one
// pipeline: every GET's reply and QUIT's +OK arrive before EOF, the SET
// after QUIT does not run. Before the fix the hangup right after the
// batch cut the backlog off (the client read a few MiB, then EOF).
func TestQuitAfterBacklog(t *testing.T) {
	for _, fe := range []string{"epoll", "goroutines"} {
		t.Run(fe, func(t *testing.T) {
			s := closingServer(t, fe)
			conn, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			pipe := strings.Repeat(respCmd("GET", "big"), closingReads) + respCmd("QUIT") + respCmd("SET", "afterquit", "1")
			if _, err := conn.Write([]byte(pipe)); err != nil {
				t.Fatal(err)
			}
			sameReplies(t, readToEOF(t, conn), bigReplies()+"+OK\r\n")
			if rep := rawReply(t, s.Addr(), respCmd("EXISTS", "afterquit")); rep != ":0\r\n" {
				t.Fatalf("a command after QUIT ran: EXISTS afterquit = %q", rep)
			}
		})
	}
}

// TestClientKillAfterBacklog: a client that pipelined GETs of a 1 MiB
// value and reads nothing is killed by another (CLIENT KILL ID): it still
// gets every reply to what it ran, then EOF; a client killing itself gets
// the reply to CLIENT KILL, then EOF, and what it sent after does not run.
func TestClientKillAfterBacklog(t *testing.T) {
	for _, fe := range []string{"epoll", "goroutines"} {
		t.Run(fe, func(t *testing.T) {
			s := closingServer(t, fe)
			victim, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer victim.Close()
			pipe := respCmd("CLIENT", "SETNAME", "victim") + strings.Repeat(respCmd("GET", "big"), closingReads)
			if _, err := victim.Write([]byte(pipe)); err != nil {
				t.Fatal(err)
			}
			id := waitClient(t, s.Addr(), "victim", "get")
			if rep := rawReply(t, s.Addr(), respCmd("CLIENT", "KILL", "ID", id)); rep != ":1\r\n" {
				t.Fatalf("CLIENT KILL ID %s: %q", id, rep)
			}
			sameReplies(t, readToEOF(t, victim), "+OK\r\n"+bigReplies())

			self, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer self.Close()
			self.Write([]byte(respCmd("CLIENT", "SETNAME", "self") + respCmd("PING")))
			buf := make([]byte, len("+OK\r\n+PONG\r\n"))
			self.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := io.ReadFull(self, buf); err != nil {
				t.Fatal(err)
			}
			sid := waitClient(t, s.Addr(), "self", "ping")
			self.Write([]byte(respCmd("SET", "beforekill", "1") + respCmd("CLIENT", "KILL", "ID", sid) + respCmd("SET", "afterkill", "1")))
			if got := readToEOF(t, self); got != "+OK\r\n:1\r\n" {
				t.Fatalf("self kill: %q", got)
			}
			if rep := rawReply(t, s.Addr(), respCmd("EXISTS", "beforekill", "afterkill")); rep != ":1\r\n" {
				t.Fatalf("EXISTS beforekill afterkill = %q, want :1 (only the command before the kill ran)", rep)
			}
		})
	}
}

// waitClient polls CLIENT LIST until the client named name has run cmd;
// returns its id.
func waitClient(t *testing.T, addr, name, cmd string) string {
	t.Helper()
	for i := 0; i < 3000; i++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(respCmd("CLIENT", "LIST")))
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 64<<10)
		n, _ := conn.Read(b)
		conn.Close()
		for _, line := range strings.Split(string(b[:n]), "\n") {
			if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " cmd="+cmd+" ") {
				f := strings.Fields(line)
				for _, kv := range f {
					if id, ok := strings.CutPrefix(kv, "id="); ok {
						return id
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("client %s never ran %s", name, cmd)
	return ""
}
