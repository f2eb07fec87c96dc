// arrival.go: the order commands arrived in. Each connection has its own
// reader goroutine, so two clients' commands sent microseconds apart (two
// deferred BRPOPLPUSHs, then an LPUSH on a third connection) can reach the
// executor in either order — about half the time on the 2-core machine —
// where Redis, reading every socket in one event loop, sees them in
// arrival order; for blocking commands the order decides who is served.
// So each read takes the kernel's receive timestamp (SO_TIMESTAMPNS via
// recvmsg), and a batch that holds a blocking command waits a moment for
// readers woken together with it and is then ordered by arrival.
//
// Invariants: a connection's requests keep their order (their timestamps
// do not decrease and the sort is stable).
package redis

import (
	"encoding/binary"
	"io"
	"net"
	"sort"
	"syscall"
	"time"
	"unsafe"
)

// tsReader reads a TCP connection with recvmsg, keeping the receive time
// (Unix ns) of the data last read.
type tsReader struct {
	rc   syscall.RawConn
	oob  []byte
	last int64
	// One read's state, for recvOnce (kept here so a read allocates nothing).
	recv    func(fd uintptr) bool
	p       []byte
	msg     syscall.Msghdr
	iov     syscall.Iovec
	n, oobn int
	err     error
}

// arrivalReader is a reader of conn and a function giving the arrival
// time of the data last read (the time of the read if the kernel gives
// none).
func arrivalReader(conn net.Conn) (io.Reader, func() int64) {
	tc, ok := conn.(*net.TCPConn)
	if ok {
		if rc, err := tc.SyscallConn(); err == nil {
			var serr error
			rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			})
			if serr == nil {
				t := &tsReader{rc: rc, oob: make([]byte, 128)}
				t.recv = t.recvOnce
				return t, func() int64 { return t.last }
			}
		}
	}
	var last int64
	return readerFunc(func(p []byte) (int, error) {
		n, err := conn.Read(p)
		last = time.Now().UnixNano()
		return n, err
	}), func() int64 { return last }
}

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// Read is one recvmsg into p. It allocates nothing: the message header
// and the read callback live in t (syscall.Recvmsg and
// ParseSocketControlMessage allocated on every read).
func (t *tsReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	t.p = p
	rerr := t.rc.Read(t.recv)
	t.p = nil
	n, oobn, err := t.n, t.oobn, t.err
	switch {
	case rerr != nil:
		return 0, rerr
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	t.last = time.Now().UnixNano()
	if ts, ok := timestampNS(t.oob[:oobn]); ok {
		t.last = ts
	}
	return n, nil
}

// recvOnce is the rc.Read callback (bound once as t.recv): one recvmsg of
// t.p; false (wait for readiness) on EAGAIN.
func (t *tsReader) recvOnce(fd uintptr) bool {
	t.iov.Base = &t.p[0]
	t.iov.SetLen(len(t.p))
	t.msg.Iov = &t.iov
	t.msg.Iovlen = 1
	t.msg.Control = &t.oob[0]
	t.msg.SetControllen(len(t.oob))
	t.msg.Flags = 0
	r, _, errno := syscall.Syscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&t.msg)), 0)
	t.n, t.oobn, t.err = int(r), int(t.msg.Controllen), nil
	if errno != 0 {
		t.n, t.oobn, t.err = 0, 0, errno
	}
	return errno != syscall.EAGAIN
}

// timestampNS finds the SO_TIMESTAMPNS control message in oob (Unix ns).
func timestampNS(oob []byte) (int64, bool) {
	for len(oob) >= syscall.SizeofCmsghdr {
		l := int(binary.LittleEndian.Uint64(oob))
		level := int32(binary.LittleEndian.Uint32(oob[8:]))
		typ := int32(binary.LittleEndian.Uint32(oob[12:]))
		if l < syscall.SizeofCmsghdr || l > len(oob) {
			return 0, false
		}
		if level == syscall.SOL_SOCKET && typ == syscall.SO_TIMESTAMPNS && l-syscall.SizeofCmsghdr >= 16 {
			data := oob[syscall.SizeofCmsghdr:]
			sec, nsec := binary.LittleEndian.Uint64(data), binary.LittleEndian.Uint64(data[8:])
			return int64(sec)*1e9 + int64(nsec), true
		}
		adv := (l + 7) &^ 7
		if adv > len(oob) {
			return 0, false
		}
		oob = oob[adv:]
	}
	return 0, false
}

var blockingCmds = map[string]bool{"blpop": true, "brpop": true, "brpoplpush": true, "blmove": true, "blmpop": true,
	"bzpopmin": true, "bzpopmax": true, "bzmpop": true}

func hasBlocking(batch []*request) bool {
	for _, r := range batch {
		for _, args := range r.cmds {
			if len(args) > 0 && len(args[0]) >= 5 && (args[0][0]|0x20) == 'b' && blockingCmds[lowerASCII(args[0])] {
				return true
			}
		}
	}
	return false
}

func lowerASCII(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// orderByArrival sorts a batch by arrival time (stable: a connection's
// requests keep their order).
func orderByArrival(batch []*request) {
	sort.SliceStable(batch, func(i, j int) bool { return batch[i].at < batch[j].at })
}
