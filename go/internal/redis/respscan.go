// respscan.go: commands parsed straight from a read buffer. The epoll
// front end (evloop_linux.go) reads whatever a socket holds — possibly
// half a command — so it needs a parser that says "not yet, I need at
// least N bytes" instead of waiting for more, as resp.go's bufio parser
// (the goroutine readers') does. parseOne applies the same rules with the
// same error replies: a RESP array of `$len` bulk strings, or an inline
// line; limits maxArgs, maxBulk and maxInline.
//
// Invariants: a command is parsed only once it is whole (the first pass
// frames it and notes where its arguments are; only then are they copied
// into the argument arena), so a partial command costs no copies; a bulk
// length above maxBulk or a line above maxInline is an error, never waited
// for. TestScanCommands checks every split of a pipeline against the bufio
// parser, TestScanMalformed the error replies.
//
// Crash behaviour: none; this file touches no pool memory.
package redis

import "bytes"

// argSpan is where one argument lies in the buffer.
type argSpan struct{ at, n int }

// parseOne parses the first command of b. Whole: its arguments (nil for an
// empty command, which is skipped), the bytes it took and ok. Partial:
// ok false and the length b needs at least. A protocol violation: err.
// offs is scratch space (returned for reuse).
func parseOne(b []byte, a *argArena, offs []argSpan) (args [][]byte, n int, ok bool, need int, o []argSpan, err error) {
	end, ok, err := lineEnd(b, 0)
	if err != nil || !ok {
		return nil, 0, false, len(b) + 1, offs, err
	}
	line := trimCR(b[:end-1])
	if b[0] != '*' {
		args, err := inlineArgs(line)
		return args, end, true, 0, offs, err
	}
	count, perr := parseLen(line[1:])
	if perr != nil || count > maxArgs {
		return nil, 0, false, 0, offs, protoError("invalid multibulk length")
	}
	if count <= 0 {
		return nil, end, true, 0, offs, nil
	}
	offs, n, need, err = frameBulks(b, end, int(count), offs[:0])
	if err != nil || need > 0 {
		return nil, 0, false, need, offs, err
	}
	args = a.list(len(offs))
	for _, s := range offs {
		v := a.bytes(s.n)
		copy(v, b[s.at:s.at+s.n])
		args = append(args, v[:s.n:s.n])
	}
	return args, n, true, 0, offs, nil
}

// frameBulks finds count bulk strings from pos: their spans and the end,
// or the length b needs at least.
func frameBulks(b []byte, pos, count int, offs []argSpan) ([]argSpan, int, int, error) {
	for i := 0; i < count; i++ {
		if pos >= len(b) {
			return offs, 0, pos + 1, nil
		}
		hdr, ok, err := lineEnd(b, pos)
		if err != nil || !ok {
			return offs, 0, len(b) + 1, err
		}
		line := trimCR(b[pos : hdr-1])
		if len(line) == 0 || line[0] != '$' {
			got := "?"
			if len(line) > 0 {
				got = string(line[0])
			}
			return offs, 0, 0, protoError("expected '$', got '" + got + "'")
		}
		l, perr := parseLen(line[1:])
		if perr != nil || l < 0 || l > maxBulk {
			return offs, 0, 0, protoError("invalid bulk length")
		}
		pos = hdr + int(l) + 2
		if pos > len(b) {
			return offs, 0, pos, nil
		}
		if b[pos-2] != '\r' || b[pos-1] != '\n' {
			return offs, 0, 0, protoError("invalid bulk terminator")
		}
		offs = append(offs, argSpan{hdr, int(l)})
	}
	return offs, pos, 0, nil
}

// lineEnd is the index just past the LF of the line starting at from, and
// true; false if the line is unterminated and may still grow. A line
// (LF included) longer than maxInline is an error, as readLine's.
func lineEnd(b []byte, from int) (int, bool, error) {
	i := bytes.IndexByte(b[from:], '\n')
	switch {
	case i >= 0 && i+1 > maxInline, i < 0 && len(b)-from > maxInline:
		return 0, false, protoError("too big inline request")
	case i < 0:
		return 0, false, nil
	}
	return from + i + 1, true, nil
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}
