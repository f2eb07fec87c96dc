// replybuf_test.go: a client's reply buffer is reused across its requests
// (clientout.go, takeReplyBuf) and never shared by two requests at once.
package redis

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	engram "github.com/engram-pm/engram-go"
)

// TestReplyBufferReuse runs batches for one client over a pipe: after a
// first request the client has a spare buffer; two requests of the
// client in one batch (the second gets none while the first holds it)
// answer in order with their own replies; after the batch the client
// keeps a buffer, and its next request builds its replies in that same
// memory.
func TestReplyBufferReuse(t *testing.T) {
	s, _ := startCfg(t, Config{Addr: "127.0.0.1:0", Pool: filepath.Join(tmpDir(t), "r.pool")})
	srv, cli := net.Pipe()
	t.Cleanup(func() { srv.Close(); cli.Close() })
	c := &client{id: 1, conn: srv, proto: 2, authed: true}
	cmd := func(args ...string) [][]byte {
		out := make([][]byte, len(args))
		for i, a := range args {
			out[i] = []byte(a)
		}
		return out
	}
	expect := func(want string) {
		t.Helper()
		got := make([]byte, len(want))
		if _, err := io.ReadFull(cli, got); err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("replies %q, want %q", got, want)
		}
	}

	s.execMu.Lock()
	defer s.execMu.Unlock()
	// A first request leaves the client a buffer with room for what follows.
	big := strings.Repeat("x", 200)
	s.runBatch([]*request{{c: c, cmds: [][][]byte{cmd("ECHO", big)}}})
	expect("$200\r\n" + big + "\r\n")
	r1 := &request{c: c, cmds: [][][]byte{cmd("SET", "a", "first"), cmd("GET", "a")}}
	r2 := &request{c: c, cmds: [][][]byte{cmd("SET", "b", "second"), cmd("GET", "b"), cmd("GET", "a")}}
	s.runBatch([]*request{r1, r2}) // a pipe is no socket: write leaves the bytes to the flusher
	expect("+OK\r\n$5\r\nfirst\r\n+OK\r\n$6\r\nsecond\r\n$5\r\nfirst\r\n")
	if cap(c.replyBuf) == 0 {
		t.Fatal("the client kept no reply buffer after its batch")
	}
	kept := &c.replyBuf[:1][0]
	r3 := &request{c: c, cmds: [][][]byte{cmd("GET", "b")}}
	if err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, r3) }); err != nil {
		t.Fatal(err)
	}
	if string(r3.out.b) != "$6\r\nsecond\r\n" {
		t.Fatalf("GET b: %q", r3.out.b)
	}
	if &r3.out.b[0] != kept {
		t.Fatal("the next request did not build its replies in the client's kept buffer")
	}
	if c.replyBuf != nil {
		t.Fatal("the client still offers the buffer a request holds")
	}
}
