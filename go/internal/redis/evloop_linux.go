//go:build linux

// evloop_linux.go: the epoll front end (Linux; the default, `--io epoll`).
// Instead of one reader goroutine per connection, parked in Go's
// netpoller, K event loops (`--io-loops`, default 1) each wait in
// epoll_wait over their connections' sockets, as redis-server's event loop
// does. One loop turn reads every ready socket once (level-triggered: what
// is not read now is reported again), parses every whole command straight
// from the read buffer (respscan.go; a partial command waits in the
// connection's buffer for the next read), and then runs all of them itself under
// execMu, in batches of at most batchMax commands (one region, one commit
// each: a turn is a natural group commit); the replies go out after each
// commit with one write per client (client.write: no deadline timer unless
// the socket is full). No goroutine wakes per request and no read ends in
// EAGAIN.
//
// Invariants: a registered socket is never closed while the loop may read
// it — the server hangs a client up with shutdown(2) (client.hangup), the
// loop then reads EOF, deregisters the socket and queues the client's
// close request after its commands; only dropClient (after that) and
// Server.Close (after the loops stopped) close it. A connection's commands
// run in the order read; with one loop all connections' commands run in
// the order the loop read them (with more loops, turns of different loops
// run in the order they take execMu). An epoll_wait that fails with
// anything but EINTR (a broken epoll instance: its connections can no
// longer be read) is logged and stops the server (Server.failServing:
// Serve returns the error, the pool is closed cleanly, exit status 1)
// instead of leaving its clients unanswered without a word.
//
// Crash behaviour: none of its own; it hands commands to the executor.
package redis

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const (
	evReadSize  = 64 << 10 // bytes read per socket per turn
	evMaxEvents = 256      // sockets handled per epoll_wait
	evWakeToken = 0        // the event data of the loop's wake pipe (client ids start at 1)
	yieldEvery  = int64(5 * time.Millisecond)
)

// evLoop is one event loop: its epoll instance, its connections and the
// buffers one turn uses.
type evLoop struct {
	s      *Server
	epfd   int
	wake   [2]int // a pipe: Server.Close writes one byte to wake[1]
	mu     sync.Mutex
	conns  map[int64]*evConn // guarded by mu (add runs on the accept goroutine)
	events []syscall.EpollEvent
	buf    []byte // the read buffer of a connection with nothing pending
	arena  argArena
	offs   []argSpan // parseOne's scratch
	turn   []*request
	errs   []protoFail
	cmds   [][][]byte // one request's commands while parsing (copied out by queue)
	cmdBuf [][][]byte // carved into requests' command lists (never reused: see argArena)
	reqBuf []request  // carved into requests (likewise)
	// lastReady: the events the last wait returned (wait polls without
	// blocking first only after a turn of several sockets).
	lastReady int
	yielded   int64 // when the loop last yielded (Unix ns; yieldNow)

	// fdsClosed: epfd and the wake pipe are closed (mu): add and wakeUp
	// then leave them alone (a loop whose epoll_wait failed closes them
	// while the server still runs, and a closed number may be reused).
	fdsClosed bool
}

// evConn is a connection of a loop.
type evConn struct {
	c    *client
	f    *fdConn // c.conn
	in   []byte  // an incomplete command carried to the next read
	need int     // len(in) the next command needs at least (skip the scan below it)
}

// protoFail is a connection that sent a protocol error this turn.
type protoFail struct {
	ec  *evConn
	msg string
}

// ioEpollAvailable tells Config.IO's default.
const ioEpollAvailable = true

// newLoops creates k loops (not yet running).
func newLoops(s *Server, k int) ([]*evLoop, error) {
	var loops []*evLoop
	for i := 0; i < k; i++ {
		l, err := newLoop(s)
		if err != nil {
			for _, o := range loops {
				o.closeFds()
			}
			return nil, err
		}
		loops = append(loops, l)
	}
	return loops, nil
}

func newLoop(s *Server) (*evLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	l := &evLoop{s: s, epfd: epfd, conns: map[int64]*evConn{}, events: make([]syscall.EpollEvent, evMaxEvents),
		buf: make([]byte, evReadSize)}
	if err := syscall.Pipe2(l.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	setToken(&ev, evWakeToken)
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wake[0], &ev); err != nil {
		l.closeFds()
		return nil, err
	}
	return l, nil
}

func (l *evLoop) closeFds() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fdsClosed {
		return
	}
	l.fdsClosed = true
	syscall.Close(l.epfd)
	syscall.Close(l.wake[0])
	syscall.Close(l.wake[1])
}

func setToken(ev *syscall.EpollEvent, id int64) {
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
}

func token(ev *syscall.EpollEvent) int64 {
	return int64(uint32(ev.Fd)) | int64(uint32(ev.Pad))<<32
}

// wakeUp makes the loop's epoll_wait return (Server.Close).
func (l *evLoop) wakeUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.fdsClosed {
		syscall.Write(l.wake[1], []byte{1})
	}
}

// add registers a connection (the accept goroutine); an error leaves it
// to a reader goroutine.
func (l *evLoop) add(c *client) error {
	if c.rc == nil {
		return errors.New("not a socket")
	}
	f, ok := c.conn.(*fdConn)
	if !ok {
		return errors.New("not a detached socket")
	}
	ec := &evConn{c: c, f: f}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fdsClosed {
		return errors.New("event loop stopped")
	}
	l.conns[c.id] = ec
	var cerr error
	err := c.rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP}
		setToken(&ev, c.id)
		cerr = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		delete(l.conns, c.id)
	}
	return err
}

// run is the loop: wait, read, parse, run the turn's commands.
func (l *evLoop) run() {
	defer l.s.done.Done()
	defer l.closeFds()
	for {
		n, err := l.wait()
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			// EBADF, EINVAL, EFAULT: the epoll instance is broken and no
			// connection of this loop can be read any more. Not silently:
			// log it and stop the server (failServing), unless it is
			// stopping anyway.
			select {
			case <-l.s.closed:
			default:
				l.s.failServing(fmt.Errorf("event loop: epoll_wait: %w", err))
			}
			return
		}
		select {
		case <-l.s.closed:
			return
		default:
		}
		l.turnOnce(n)
	}
}

// wait returns the ready events. After a turn that served several
// sockets it first polls without blocking and without telling the
// scheduler (under load a turn's sockets are usually ready again by the
// next one), then, if none, blocks (the scheduler hands the P on while it
// sleeps). After a turn of one socket (a single client waiting for each
// reply: it cannot have sent more yet) it blocks at once, as
// redis-server's one epoll_wait per turn: the poll would find nothing and
// cost a system call per request.
func (l *evLoop) wait() (int, error) {
	if l.lastReady > 1 {
		r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
			uintptr(len(l.events)), 0, 0, 0)
		if e == 0 && r > 0 {
			l.lastReady = int(r)
			return int(r), nil
		}
	}
	n, err := syscall.EpollWait(l.epfd, l.events, -1)
	l.lastReady = n
	return n, err
}

// turnOnce handles n ready events and runs what they brought.
func (l *evLoop) turnOnce(n int) {
	at := time.Now().UnixNano()
	for i := 0; i < n; i++ {
		id := token(&l.events[i])
		if id == evWakeToken {
			var b [64]byte
			syscall.Read(l.wake[0], b[:])
			continue
		}
		l.mu.Lock()
		ec := l.conns[id]
		l.mu.Unlock()
		if ec != nil {
			l.readConn(ec, at)
		}
	}
	if len(l.turn) > 0 {
		l.s.runTurn(l.turn)
	}
	// Protocol errors: the reply after the replies to the commands before
	// it, then the close.
	if len(l.errs) > 0 {
		l.turn = l.turn[:0]
		for _, f := range l.errs {
			f.ec.c.write([]byte("-" + f.msg + "\r\n"))
			l.turn = append(l.turn, l.remove(f.ec, at))
		}
		l.s.runTurn(l.turn)
		clear(l.errs)
		l.errs = l.errs[:0]
	}
	clear(l.turn)
	l.turn = l.turn[:0]
	l.yieldNow(at)
}

// yieldNow lets the scheduler run (runtime.Gosched) once every
// yieldEvery. A loop that is never descheduled — under load its poll
// always finds work, and blocking in epoll_wait does not count — looks
// to Go's sysmon like a goroutine running for over 10 ms: sysmon then
// preempts it with a signal and takes its P from the next cgo call it
// is in, and each such retake puts sysmon back to waking every 20 us
// for a millisecond or more (thousands of wake-ups per second, 2-3 % of
// the server's CPU, perf). A yield every few milliseconds costs a
// scheduler pass (and a wake-up of an idle thread) and avoids that.
func (l *evLoop) yieldNow(at int64) {
	if at-l.yielded >= yieldEvery {
		l.yielded = at
		runtime.Gosched()
	}
}

// readConn reads the socket once and queues its whole commands (and its
// close at EOF) on the turn.
func (l *evLoop) readConn(ec *evConn, at int64) {
	data, n, err := l.read(ec)
	if n > 0 {
		data = l.parse(ec, data, at)
		l.keep(ec, data)
	}
	if err != nil || n == 0 {
		// EOF, reset, or hung up: what was read before is queued; an
		// incomplete command is dropped with the connection.
		ec.in = nil
		l.turn = append(l.turn, l.remove(ec, at))
	}
}

// read does one read(2): into the loop's buffer, or after the
// connection's pending bytes. It returns all bytes to frame.
func (l *evLoop) read(ec *evConn) ([]byte, int, error) {
	dst := l.buf
	if len(ec.in) > 0 {
		if cap(ec.in)-len(ec.in) < evReadSize/4 {
			grown := make([]byte, len(ec.in), 2*cap(ec.in)+evReadSize)
			copy(grown, ec.in)
			ec.in = grown
		}
		dst = ec.in[len(ec.in):cap(ec.in)]
	}
	n, err := ec.f.tryRead(dst) // never parks: epoll said it is readable
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
		return nil, -1, nil // nothing after all (a spurious wake-up): try next turn
	}
	if err != nil || n <= 0 {
		return nil, 0, err
	}
	if len(ec.in) > 0 {
		return ec.in[:len(ec.in)+n], n, nil
	}
	return dst[:n], n, nil
}

// keep stores the unframed rest as the connection's pending bytes.
func (l *evLoop) keep(ec *evConn, rest []byte) {
	switch {
	case len(rest) == 0:
		if cap(ec.in) > 4*evReadSize {
			ec.in = nil // a big command passed: do not hold its buffer
		} else {
			ec.in = ec.in[:0]
		}
	case len(ec.in) > 0 && &rest[0] == &ec.in[0]:
		ec.in = rest // still waiting for the same command
	default:
		ec.in = append(ec.in[:0], rest...)
	}
}

// parse queues the whole commands at the front of data on the turn and
// returns the rest (an incomplete command).
func (l *evLoop) parse(ec *evConn, data []byte, at int64) []byte {
	if len(data) < ec.need {
		return data
	}
	ec.need = 0
	cmds := l.cmds[:0]
	pos := 0
	for pos < len(data) {
		args, n, ok, need, offs, err := parseOne(data[pos:], &l.arena, l.offs)
		l.offs = offs
		if err != nil {
			l.queue(ec.c, cmds, at)
			l.errs = append(l.errs, protoFail{ec, err.Error()})
			l.cmds = cmds[:0]
			return nil
		}
		if !ok {
			ec.need = need // relative to the rest, which keep stores
			break
		}
		pos += n
		if len(args) > 0 {
			cmds = append(cmds, args)
		}
		if len(cmds) >= l.s.batchMax {
			l.queue(ec.c, cmds, at)
			cmds = cmds[:0]
		}
	}
	l.queue(ec.c, cmds, at)
	clear(cmds)
	l.cmds = cmds[:0]
	return data[pos:]
}

// queue puts a request for cmds (copied: cmds is the loop's scratch list)
// on the turn. The request and its command list are carved from blocks
// (one allocation per many requests, as argArena's).
func (l *evLoop) queue(c *client, cmds [][][]byte, at int64) {
	if len(cmds) == 0 {
		return
	}
	var own [][][]byte
	if len(cmds) > 64 {
		own = append([][][]byte(nil), cmds...)
	} else {
		if cap(l.cmdBuf)-len(l.cmdBuf) < len(cmds) {
			l.cmdBuf = make([][][]byte, 0, 512)
		}
		k := len(l.cmdBuf)
		l.cmdBuf = append(l.cmdBuf, cmds...)
		own = l.cmdBuf[k : k+len(cmds) : k+len(cmds)]
	}
	if len(l.reqBuf) == cap(l.reqBuf) {
		l.reqBuf = make([]request, 0, 64)
	}
	l.reqBuf = append(l.reqBuf, request{c: c, cmds: own, at: at})
	l.turn = append(l.turn, &l.reqBuf[len(l.reqBuf)-1])
}

// remove deregisters a connection and returns its close request.
func (l *evLoop) remove(ec *evConn, at int64) *request {
	l.mu.Lock()
	_, had := l.conns[ec.c.id]
	delete(l.conns, ec.c.id)
	l.mu.Unlock()
	if had {
		ec.c.rc.Control(func(fd uintptr) {
			syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
		})
	}
	l.s.mu.Lock()
	delete(l.s.conns, ec.c.id)
	l.s.mu.Unlock()
	return &request{c: ec.c, kind: reqClose, at: at}
}
