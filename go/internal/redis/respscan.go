// respscan.go: where the whole commands in a read buffer end, without
// parsing them. The epoll front end (evloop_linux.go) reads whatever a
// socket holds — possibly half a command — and must hand the parser
// (resp.go, which reads until a command is complete) only whole commands,
// keeping the rest for the next read. scanCommands mirrors the parser's
// framing rules: a RESP array of `$len` bulk strings, or an inline line.
//
// Invariants: the prefix it reports parses to whole commands or to a
// protocol error inside it — a malformed header (a bad or too large
// length, a missing '$', a line longer than maxInline) ends the prefix
// right after the bad line, so the parser meets the error there and never
// an end of input; a bulk length above maxBulk is never waited for.
//
// Crash behaviour: none; this file touches no pool memory.
package redis

import "bytes"

// scanCommands returns the length of the longest prefix of b made of whole
// commands (or ending in a malformed one), and, if bytes remain, the
// total length the next command needs at least (0 if the prefix is all
// of b).
func scanCommands(b []byte) (prefix, need int) {
	for prefix < len(b) {
		n, ok, want := scanOne(b[prefix:])
		if !ok {
			return prefix, prefix + want
		}
		prefix += n
	}
	return prefix, 0
}

// scanOne frames the first command of b: its length and true, or false
// and the length it needs at least.
func scanOne(b []byte) (n int, ok bool, need int) {
	end, ok := lineEnd(b, 0)
	if !ok {
		return 0, false, len(b) + 1
	}
	if b[0] != '*' {
		return end, true, 0 // inline (the parser splits or refuses it)
	}
	count, err := parseLen(trimCR(b[1 : end-1]))
	if err != nil || count > maxArgs || count <= 0 {
		return end, true, 0
	}
	pos := end
	for i := int64(0); i < count; i++ {
		if pos >= len(b) {
			return 0, false, pos + 1
		}
		hdr, ok := lineEnd(b, pos)
		if !ok {
			return 0, false, len(b) + 1
		}
		if b[pos] != '$' {
			return hdr, true, 0 // "expected '$'"
		}
		l, err := parseLen(trimCR(b[pos+1 : hdr-1]))
		if err != nil || l < 0 || l > maxBulk {
			return hdr, true, 0 // "invalid bulk length"
		}
		pos = hdr + int(l) + 2
		if pos > len(b) {
			return 0, false, pos
		}
	}
	return pos, true, 0
}

// lineEnd is the index just past the LF of the line starting at from, and
// true; false if the line is unterminated and may still grow. A line
// longer than maxInline (plus the parser's 8 KiB read buffer, so it
// certainly passes the limit before the prefix ends) counts as ended at
// len(b): the parser refuses it ("too big inline request") instead of it
// being waited for.
func lineEnd(b []byte, from int) (int, bool) {
	i := bytes.IndexByte(b[from:], '\n')
	if i >= 0 {
		return from + i + 1, true
	}
	if len(b)-from > maxInline+16<<10 {
		return len(b), true
	}
	return 0, false
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}
