// clientout.go: replies and pushes to a client. A write is one write(2)
// straight from the caller (the epoll loop or the executor, after the
// batch's commit) when the socket takes it all — the common case: no
// deadline timer, no goroutine. What the socket does not take is kept in
// the client's output buffer and written by a flusher goroutine (one per
// client, only while there is a backlog) with a 10 s deadline per chunk,
// so a client that does not read its replies never stalls the server, as
// Redis's output buffers; later replies queue behind the backlog.
//
// Invariants: the bytes of a client's replies go out in the order written
// (c.wmu; while a flusher runs, everything is appended to c.out); a
// backlog beyond outLimit, a failed write or a chunk not taken within the
// deadline hangs the client up (as Redis's client-output-buffer-limit).
// A client closed by QUIT or CLIENT KILL (closeAfterReplies) is hung up
// only after every reply written before is out: by the caller when there
// is no backlog, else by the flusher once it has drained (Redis's
// CLIENT_CLOSE_AFTER_REPLY); before, the hangup cut the backlog off.
//
// Crash behaviour: none; no pool memory (replies are written after the
// commit that made them true).
package redis

import (
	"errors"
	"net"
	"syscall"
	"time"
)

const (
	replyKeep    = 64 << 10  // the largest reply buffer a client keeps for its next request
	outLimit     = 512 << 20 // backlog that hangs a client up
	outChunk     = 256 << 10 // bytes per deadline
	writeTimeout = 10 * time.Second
)

// takeReplyBuf returns the client's spare reply buffer, empty, for a
// request's replies (nil if another request of the same batch holds it):
// once a client has one, its replies cost no allocation and no growth.
// The buffer belongs to one request until afterCommit has written it and
// handed it back (keepReplyBuf); write copies what it keeps, so the
// buffer is free again when write returns. Executor-owned (execMu).
func (c *client) takeReplyBuf() []byte {
	b := c.replyBuf[:0]
	c.replyBuf = nil
	return b
}

// keepReplyBuf hands a written reply buffer back to its client (one
// larger than replyKeep, after a big reply, is left to the collector).
func (c *client) keepReplyBuf(b []byte) {
	if cap(b) > 0 && cap(b) <= replyKeep {
		c.replyBuf = b[:0]
	}
}

// write sends bytes to the client (replies and pushes): at once if the
// socket takes them, else through the flusher.
func (c *client) write(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.flushing {
		if len(c.out)+len(b) > outLimit {
			c.hangup()
			return
		}
		c.out = append(c.out, b...)
		return
	}
	if c.rc != nil {
		n, werr, err := c.tryWrite(b)
		if err == nil && werr == nil && n == len(b) {
			return
		}
		if err != nil || (werr != nil && !errors.Is(werr, syscall.EAGAIN) && !errors.Is(werr, syscall.EINTR)) {
			c.hangup()
			return
		}
		b = b[max(n, 0):]
	}
	c.out = append(c.out[:0], b...)
	c.flushing = true
	go c.flush()
}

// flush writes the backlog until it is empty (the flusher goroutine).
func (c *client) flush() {
	for {
		c.wmu.Lock()
		buf := c.out
		c.out = nil
		if len(buf) == 0 {
			c.flushing = false
			hang := c.hangAfter
			c.wmu.Unlock()
			if hang {
				c.hangup() // QUIT or CLIENT KILL: the backlog is out
			}
			return
		}
		c.wmu.Unlock()
		for len(buf) > 0 {
			n := min(len(buf), outChunk)
			c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := c.conn.Write(buf[:n]); err != nil {
				c.hangup()
				c.wmu.Lock()
				c.out, c.flushing = nil, false // later writes fail and hang up again
				c.wmu.Unlock()
				return
			}
			buf = buf[n:]
		}
	}
}

// tryWrite is one write(2) of b, never parking: err is set if the
// connection is closed.
func (c *client) tryWrite(b []byte) (n int, werr, err error) {
	if f, ok := c.conn.(*fdConn); ok {
		n, werr = f.tryWrite(b)
		if errors.Is(werr, net.ErrClosed) {
			return 0, nil, werr
		}
		return n, werr, nil
	}
	return rawConnWrite(c.rc, b)
}

// rawConnWrite is one write(2) through a net.Conn's RawConn (its own
// function: the closure's captured results would otherwise be allocated
// on every tryWrite, the fdConn path's too).
func rawConnWrite(rc syscall.RawConn, b []byte) (n int, werr, err error) {
	err = rc.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), b)
		return true
	})
	return n, werr, err
}

// closeAfterReplies hangs the client up once every reply written so far
// has gone out: now if the socket took them all, else when the flusher
// has written the backlog (QUIT, CLIENT KILL).
func (c *client) closeAfterReplies() {
	c.wmu.Lock()
	if c.flushing {
		c.hangAfter = true
		c.wmu.Unlock()
		return
	}
	c.wmu.Unlock()
	c.hangup()
}

// hangup ends the connection without closing its descriptor (the epoll
// front end may be about to read it): the reader then sees EOF and the
// client's close request drops it (dropClient closes the descriptor).
func (c *client) hangup() {
	if c.rc == nil || c.rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) }) != nil {
		c.conn.Close()
	}
}
