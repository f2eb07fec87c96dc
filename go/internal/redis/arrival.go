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
)

// tsReader reads a TCP connection with recvmsg, keeping the receive time
// (Unix ns) of the data last read.
type tsReader struct {
	rc   syscall.RawConn
	oob  []byte
	last int64
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

func (t *tsReader) Read(p []byte) (int, error) {
	var n, oobn int
	var err error
	rerr := t.rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, err = syscall.Recvmsg(int(fd), p, t.oob, 0)
		return err != syscall.EAGAIN
	})
	switch {
	case rerr != nil:
		return 0, rerr
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	t.last = time.Now().UnixNano()
	if msgs, err := syscall.ParseSocketControlMessage(t.oob[:oobn]); err == nil {
		for _, m := range msgs {
			if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS && len(m.Data) >= 16 {
				sec, nsec := binary.LittleEndian.Uint64(m.Data), binary.LittleEndian.Uint64(m.Data[8:])
				t.last = int64(sec)*1e9 + int64(nsec)
			}
		}
	}
	return n, nil
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
