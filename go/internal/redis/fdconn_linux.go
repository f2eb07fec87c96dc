//go:build linux

// fdconn_linux.go: a client socket the epoll front end owns outright.
// Go's runtime registers every net.Conn in its own epoll set
// (edge-triggered), so with the event loops reading the sockets the
// runtime's poller was woken by every request as well (an epoll_pwait and
// often a thread wake-up per request, strace -c). detach takes a dup of
// the connection's descriptor and closes the net.Conn, which removes it
// from the runtime's set; the dup is then an fdConn: a net.Conn (for the
// client's writes and close) and a syscall.RawConn (for the loop's reads)
// over the raw descriptor.
//
// Invariants: the descriptor is closed once, by Close, and never while a
// Read, Write or Control callback runs (they hold mu shared, Close holds
// it exclusively), so a closed number reused by a new connection is never
// read or written by mistake. A Write blocks (in ppoll) only while the
// socket is full, at most until the write deadline or Close (which shuts
// the socket down first).
//
// Crash behaviour: none; no pool memory.
package redis

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// fdConn is a non-blocking socket descriptor as a net.Conn.
type fdConn struct {
	mu        sync.RWMutex
	fd        int // -1 once closed
	local     net.Addr
	remote    net.Addr
	wdeadline time.Time // guarded by mu (shared is enough: one writer at a time, client.wmu)
}

// detach moves conn's descriptor out of Go's poller into an fdConn; on
// failure conn is left as it was.
func detach(conn net.Conn) (*fdConn, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = dupCloexec(int(fd))
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	if err := syscall.SetNonblock(nfd, true); err != nil {
		syscall.Close(nfd)
		return nil, err
	}
	f := &fdConn{fd: nfd, local: conn.LocalAddr(), remote: conn.RemoteAddr()}
	conn.Close() // the runtime deregisters and closes its descriptor; ours stays
	return f, nil
}

func dupCloexec(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// tryRead is one read(2) (no closure, no allocation: the loop's path).
func (f *fdConn) tryRead(b []byte) (int, error) { return f.tryRW(syscall.SYS_READ, b) }

// tryWrite is one write(2) (the replies' path).
func (f *fdConn) tryWrite(b []byte) (int, error) { return f.tryRW(syscall.SYS_WRITE, b) }

func (f *fdConn) tryRW(trap uintptr, b []byte) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.fd < 0 {
		return 0, net.ErrClosed
	}
	return rawRW(trap, f.fd, b)
}

// rawRW is a read(2) or write(2) of a non-blocking socket without telling
// Go's scheduler (RawSyscall): it never blocks, so the scheduler need not
// hand the thread's P to another thread, and sysmon does not wake to
// retake it (syscall.Read/Write enter and leave a "syscall" state each).
func rawRW(trap uintptr, fd int, b []byte) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	r, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(p), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// raw is the connection as a syscall.RawConn.
func (f *fdConn) raw() syscall.RawConn { return fdRaw{f} }

// with runs fn on the open descriptor (mu held shared).
func (f *fdConn) with(fn func(fd int)) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.fd < 0 {
		return net.ErrClosed
	}
	fn(f.fd)
	return nil
}

// Read is not used (the loop reads through raw); it reads once.
func (f *fdConn) Read(b []byte) (int, error) {
	n, err := 0, error(nil)
	if cerr := f.with(func(fd int) { n, err = syscall.Read(fd, b) }); cerr != nil {
		return 0, cerr
	}
	if err == nil && n == 0 && len(b) > 0 {
		err = io.EOF
	}
	return max(n, 0), err
}

// Write writes all of b, waiting (ppoll) while the socket is full, until
// the write deadline.
func (f *fdConn) Write(b []byte) (int, error) {
	done := 0
	var err error
	cerr := f.with(func(fd int) {
		for done < len(b) && err == nil {
			n, werr := syscall.Write(fd, b[done:])
			switch {
			case werr == nil:
				done += n
			case errors.Is(werr, syscall.EINTR):
			case errors.Is(werr, syscall.EAGAIN):
				err = f.waitWritable(fd)
			default:
				err = werr
			}
		}
	})
	if cerr != nil {
		return done, cerr
	}
	return done, err
}

// waitWritable waits in ppoll until fd can take more bytes or the write
// deadline passes.
func (f *fdConn) waitWritable(fd int) error {
	wait := time.Duration(-1)
	if !f.wdeadline.IsZero() {
		if wait = time.Until(f.wdeadline); wait <= 0 {
			return os.ErrDeadlineExceeded
		}
	}
	pfd := struct {
		fd             int32
		events, revent int16
	}{int32(fd), 0x4 /* POLLOUT */, 0}
	var tsp *syscall.Timespec
	if wait >= 0 {
		ts := syscall.NsecToTimespec(int64(wait))
		tsp = &ts
	}
	_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(tsp)), 0, 0, 0)
	if e != 0 && e != syscall.EINTR {
		return e
	}
	return nil
}

// Close closes the descriptor once. It shuts the socket down first, so a
// Write waiting in ppoll returns (EPIPE) instead of holding the close up
// until its deadline.
func (f *fdConn) Close() error {
	f.mu.RLock()
	if f.fd >= 0 {
		syscall.Shutdown(f.fd, syscall.SHUT_RDWR)
	}
	f.mu.RUnlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 {
		return net.ErrClosed
	}
	err := syscall.Close(f.fd)
	f.fd = -1
	return err
}

func (f *fdConn) LocalAddr() net.Addr                { return f.local }
func (f *fdConn) RemoteAddr() net.Addr               { return f.remote }
func (f *fdConn) SetDeadline(t time.Time) error      { return f.SetWriteDeadline(t) }
func (f *fdConn) SetReadDeadline(t time.Time) error  { return nil }
func (f *fdConn) SetWriteDeadline(t time.Time) error { f.wdeadline = t; return nil }

// fdRaw is an fdConn as a syscall.RawConn: the callbacks run once
// (reporting not-ready is the caller's business: epoll tells readiness).
type fdRaw struct{ f *fdConn }

func (r fdRaw) Control(fn func(fd uintptr)) error {
	return r.f.with(func(fd int) { fn(uintptr(fd)) })
}

func (r fdRaw) Read(fn func(fd uintptr) bool) error {
	return r.f.with(func(fd int) { fn(uintptr(fd)) })
}

func (r fdRaw) Write(fn func(fd uintptr) bool) error {
	return r.f.with(func(fd int) { fn(uintptr(fd)) })
}
