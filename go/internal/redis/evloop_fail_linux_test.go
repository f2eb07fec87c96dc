// evloop_fail_linux_test.go: an event loop whose epoll_wait fails with
// something other than EINTR (its epoll descriptor made /dev/null, so the
// call says EINVAL) logs the error and stops the server: Serve returns it
// (engram-redis then exits with status 1) instead of the loop ending
// without a word while the server keeps accepting connections nobody reads.
package redis

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuf is a log writer the server and the test share.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestEpollWaitFailureStopsServer(t *testing.T) {
	var log lockedBuf
	old := logOut
	logOut = &log
	defer func() { logOut = old }()
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: filepath.Join(tmpDir(t), "e.pool"), IO: "epoll"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	if rep := rawReply(t, s.Addr(), "PING\r\n"); rep != "+PONG\r\n" {
		t.Fatalf("PING: %q", rep)
	}
	// Break the loop's epoll descriptor: the number now names /dev/null
	// (no descriptor is closed under the loop), then wake the loop so
	// that its next epoll_wait fails.
	l := s.loops[0]
	null, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(null, l.epfd, syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	syscall.Close(null)
	l.wakeUp()
	select {
	case err := <-served:
		if err == nil || !strings.Contains(err.Error(), "epoll_wait") {
			t.Fatalf("Serve returned %v, want the epoll_wait error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the server kept running with a dead event loop")
	}
	if got := log.String(); !strings.Contains(got, "engram-redis: event loop: epoll_wait: invalid argument; shutting down") {
		t.Fatalf("log: %q", got)
	}
}
