//go:build !linux

// evloop_other.go: no epoll front end off Linux; every connection has a
// reader goroutine (`--io goroutines`, server.go). The stubs keep the
// server's code the same on every system.
//
// Crash behaviour: none.
package redis

import (
	"errors"
	"net"
	"syscall"
)

const ioEpollAvailable = false

type evLoop struct{}

func newLoops(*Server, int) ([]*evLoop, error) {
	return nil, errors.New("--io epoll needs Linux")
}

func (*evLoop) add(*client) error { return errors.New("--io epoll needs Linux") }
func (*evLoop) run()              {}
func (*evLoop) wakeUp()           {}

type fdConn struct{ net.Conn }

func detach(net.Conn) (*fdConn, error)       { return nil, errors.New("--io epoll needs Linux") }
func (*fdConn) raw() syscall.RawConn         { return nil }
func (*fdConn) tryRead([]byte) (int, error)  { return 0, errors.New("--io epoll needs Linux") }
func (*fdConn) tryWrite([]byte) (int, error) { return 0, errors.New("--io epoll needs Linux") }
