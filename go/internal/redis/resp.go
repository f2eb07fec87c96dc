// Package redis is engram-redis: a Redis-compatible server whose data lives
// in an Engram pool (see docs/redis.md).
//
// This file: the RESP protocol. readCommand parses one command (a RESP
// array of bulk strings, or an inline command line) with hard limits, so
// malformed input, huge lengths (a bulk length of 2^40) and unterminated
// arrays give a protocol error and never an allocation of that size or a
// panic. The reply writer speaks RESP2 and RESP3 (after HELLO 3).
//
// Crash behaviour: none; this file touches no pool memory.
package redis

import (
	"bufio"
	"errors"
	"math"
	"strconv"
	"strings"
)

const (
	maxBulk      = 512 << 20 // Redis's proto-max-bulk-len
	maxArgs      = 1 << 20   // arguments per command
	maxInline    = 64 << 10  // an inline command line
	protoErrHead = "ERR Protocol error: "
)

// protoError is a protocol violation: the server replies and closes.
type protoError string

func (e protoError) Error() string { return protoErrHead + string(e) }

// readLine reads a CRLF (or LF) terminated line of at most max bytes.
//
// The common case, a line inside the reader's buffer, is returned without a
// copy: it is valid until the next read from r (callers parse it at once).
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	chunk, err := r.ReadSlice('\n')
	if err == nil {
		return trimLine(chunk, max)
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	line := append([]byte(nil), chunk...)
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
		if len(line) > max {
			return nil, protoError("too big inline request")
		}
	}
	return trimLine(line, max)
}

// trimLine drops the line's LF (and CR), refusing one longer than max.
func trimLine(line []byte, max int) ([]byte, error) {
	if len(line) > max {
		return nil, protoError("too big inline request")
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// argArena hands out the argument bytes and argument lists of the
// commands one connection reads, carved from shared blocks, so a small
// command costs no allocation of its own (a block serves hundreds). A block
// is never reused: a carved slice stays valid however long a command keeps
// it (a MULTI queue, a blocked client), the GC freeing the block after its
// last one. Each carved slice's capacity ends at its length, so an append
// to it copies instead of writing over its neighbour.
type argArena struct {
	buf  []byte
	args [][]byte
}

const (
	arenaBlock   = 16 << 10 // bytes per block
	arenaArgs    = 512      // argument slots per block
	arenaMaxPart = 1 << 10  // larger pieces get an allocation of their own
)

// bytes returns a zeroed-or-stale n-byte slice (the caller overwrites it).
func (a *argArena) bytes(n int) []byte {
	if a == nil || n > arenaMaxPart {
		return make([]byte, n)
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, arenaBlock)
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	return a.buf[l : l+n : l+n]
}

// list returns an empty argument list with room for n.
func (a *argArena) list(n int) [][]byte {
	if a == nil || n > 64 {
		return make([][]byte, 0, min(n, 1024))
	}
	if cap(a.args)-len(a.args) < n {
		a.args = make([][]byte, 0, arenaArgs)
	}
	l := len(a.args)
	a.args = a.args[:l+n]
	return a.args[l : l : l+n]
}

// readCommand reads one command; nil args (and nil error) for an empty
// inline line.
func readCommand(r *bufio.Reader) ([][]byte, error) {
	return readCommandIn(r, nil)
}

// readCommandIn is readCommand with its argument memory from a (nil: the
// heap).
func readCommandIn(r *bufio.Reader, a *argArena) ([][]byte, error) {
	b, err := r.Peek(1)
	if err != nil {
		return nil, err
	}
	if b[0] != '*' {
		return readInline(r)
	}
	line, err := readLine(r, maxInline)
	if err != nil {
		return nil, err
	}
	n, err := parseLen(line[1:])
	if err != nil || n > maxArgs {
		return nil, protoError("invalid multibulk length")
	}
	if n <= 0 {
		return nil, nil
	}
	args := a.list(int(n))
	for i := int64(0); i < n; i++ {
		b, err := readBulk(r, a)
		if err != nil {
			return nil, err
		}
		args = append(args, b)
	}
	return args, nil
}

func readBulk(r *bufio.Reader, a *argArena) ([]byte, error) {
	line, err := readLine(r, maxInline)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '$' {
		got := "?"
		if len(line) > 0 {
			got = string(line[0])
		}
		return nil, protoError("expected '$', got '" + got + "'")
	}
	n, err := parseLen(line[1:])
	if err != nil || n < 0 || n > maxBulk {
		return nil, protoError("invalid bulk length")
	}
	if n+2 <= 64<<10 {
		// Small (the common case): read straight into arena memory.
		buf := a.bytes(int(n) + 2)
		if _, err := ioReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, protoError("invalid bulk terminator")
		}
		return buf[:n:n], nil
	}
	// Read in chunks so a lying length cannot make us allocate it up front.
	buf := make([]byte, 0, min(n+2, 64<<10))
	for int64(len(buf)) < n+2 {
		want := min(n+2-int64(len(buf)), 64<<10)
		chunk := make([]byte, want)
		if _, err := ioReadFull(r, chunk); err != nil {
			return nil, err
		}
		buf = append(buf, chunk...)
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return nil, protoError("invalid bulk terminator")
	}
	return buf[:n], nil
}

// parseLen parses a length: plain digits without allocating (the common
// case), anything else as strconv.ParseInt does.
func parseLen(b []byte) (int64, error) {
	if len(b) > 0 && len(b) <= 18 {
		n := int64(0)
		for _, c := range b {
			if c < '0' || c > '9' {
				return strconv.ParseInt(string(b), 10, 64)
			}
			n = n*10 + int64(c-'0')
		}
		return n, nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readInline splits an inline command line on spaces, honouring quotes.
func readInline(r *bufio.Reader) ([][]byte, error) {
	line, err := readLine(r, maxInline)
	if err != nil {
		return nil, err
	}
	return inlineArgs(line)
}

// inlineArgs splits an inline command line (without its CRLF) into
// arguments (readInline and respscan.go's parseOne).
func inlineArgs(line []byte) ([][]byte, error) {
	fields, ok := splitArgs(string(line))
	if !ok {
		return nil, protoError("unbalanced quotes in request")
	}
	args := make([][]byte, len(fields))
	for i, f := range fields {
		args[i] = []byte(f)
	}
	return args, nil
}

// splitArgs is a small version of Redis's sdssplitargs: spaces separate,
// "double quotes" allow \n \t \" escapes, 'single quotes' are literal.
func splitArgs(s string) ([]string, bool) {
	var out []string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return out, true
		}
		var cur strings.Builder
		switch s[i] {
		case '"', '\'':
			q := s[i]
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if q == '"' && c == '\\' && i+1 < len(s) {
					i++
					switch s[i] {
					case 'n':
						cur.WriteByte('\n')
					case 't':
						cur.WriteByte('\t')
					case 'r':
						cur.WriteByte('\r')
					default:
						cur.WriteByte(s[i])
					}
				} else if c == q {
					closed = true
					i++
					break
				} else {
					cur.WriteByte(c)
				}
				i++
			}
			if !closed || (i < len(s) && s[i] != ' ' && s[i] != '\t') {
				return nil, false
			}
		default:
			for i < len(s) && s[i] != ' ' && s[i] != '\t' {
				cur.WriteByte(s[i])
				i++
			}
		}
		out = append(out, cur.String())
	}
}

// W builds replies in RESP2 or RESP3.
//
//engramvet:volatile a reply buffer is Go heap memory (requests' and clients'), never in the pool
type W struct {
	b     []byte
	proto int
}

func (w *W) Simple(s string) { w.b = append(append(append(w.b, '+'), s...), "\r\n"...) }
func (w *W) OK()             { w.Simple("OK") }
func (w *W) Err(s string)    { w.b = append(append(append(w.b, '-'), s...), "\r\n"...) }
func (w *W) Int(n int64) {
	w.b = append(strconv.AppendInt(append(w.b, ':'), n, 10), "\r\n"...)
}

// IntDigits is Int of a number already formatted (strconv.AppendInt's
// digits: INCR's new value, stored and replied).
func (w *W) IntDigits(d []byte) { w.b = append(append(append(w.b, ':'), d...), "\r\n"...) }
func (w *W) Bulk(s []byte) {
	w.b = append(strconv.AppendInt(append(w.b, '$'), int64(len(s)), 10), "\r\n"...)
	w.b = append(append(w.b, s...), "\r\n"...)
}
func (w *W) BulkS(s string) { w.Bulk([]byte(s)) }

// Null is a nil bulk string ($-1 in RESP2).
func (w *W) Null() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "$-1\r\n"...)
	}
}

// NullArray is a nil array (*-1 in RESP2).
func (w *W) NullArray() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "*-1\r\n"...)
	}
}

func (w *W) head(c byte, n int) {
	w.b = append(strconv.AppendInt(append(w.b, c), int64(n), 10), "\r\n"...)
}
func (w *W) Array(n int) { w.head('*', n) }

// Map opens a map of n pairs (a flat array of 2n in RESP2).
func (w *W) Map(n int) {
	if w.proto == 3 {
		w.head('%', n)
	} else {
		w.head('*', 2*n)
	}
}

// Set opens a set reply (an array in RESP2).
func (w *W) Set(n int) {
	if w.proto == 3 {
		w.head('~', n)
	} else {
		w.head('*', n)
	}
}

// Push opens an out-of-band push (pub/sub messages; an array in RESP2).
func (w *W) Push(n int) {
	if w.proto == 3 {
		w.head('>', n)
	} else {
		w.head('*', n)
	}
}

// Double writes a float: a RESP3 double, a bulk string in RESP2.
func (w *W) Double(f float64) {
	if w.proto == 3 {
		w.b = append(append(append(w.b, ','), fmtFloat(f)...), "\r\n"...)
	} else {
		w.BulkS(fmtFloat(f))
	}
}

// fmtFloat formats as Redis does for scores and INCRBYFLOAT (%.17g trimmed).
func fmtFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// fmtScore formats a score the way Redis 7 replies (shortest round trip).
func fmtScore(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
