// dispatch.go: the command table, arity and auth checks, MULTI queueing,
// and the keyspace helpers every command uses (lookup with lazy expiry,
// write with WATCH versioning).
//
// Invariants: every key change goes through ctx.touch, which bumps the
// key's WATCH version; a pool error from a command is returned (it aborts
// the transaction), a Redis error is a reply.
//
// Crash behaviour: lazy expiry deletes inside the command's transaction.
package redis

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"

	engram "github.com/engram-pm/engram-go"
)

type ctx struct {
	s    *Server
	tx   *engram.Tx
	c    *client
	w    *W
	args [][]byte
	name string
	// hob is the first hash or set object the command opens (hashObj):
	// part of the pooled context, so an HSET allocates nothing on the Go
	// heap; a second one (SMOVE, SINTERSTORE) is allocated.
	hob     hobj
	hobUsed bool
}

type cmdFunc func(x *ctx) error

type command struct {
	name              string
	arity             int // >0 exact, <0 at least -arity
	fn                cmdFunc
	flags             string // "w" write, "r" read, "a" admin/no-auth, "m" allowed in MULTI as-is, "p" pubsub ok
	first, last, step int
	denyOOM           bool // refused over maxmemory (Redis's denyoom flag: maxmem.go)
	prelog            bool // its keys are logged ahead (prelog.go)
	regionless        bool // runs without a region in a batch of such commands (readonly.go)
}

var commands = map[string]*command{}

// noMulti are the commands refused inside MULTI (Redis 7.0's no_multi flag:
// SAVE, SHUTDOWN).
var noMulti = flagged("no_multi")

func reg(name string, arity int, flags string, keys [3]int, fn cmdFunc) {
	commands[name] = &command{name: name, arity: arity, fn: fn, flags: flags, first: keys[0], last: keys[1], step: keys[2],
		denyOOM: denyOOM[name], prelog: prelogCmds[name], regionless: regionless[name]}
}

var k1 = [3]int{1, 1, 1}
var kAll = [3]int{1, -1, 1}
var k0 = [3]int{0, 0, 0}

// errWrongType etc. are Redis 7's error strings.
const (
	errWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNotInt    = "ERR value is not an integer or out of range"
	errNotFloat  = "ERR value is not a valid float"
	errSyntax    = "ERR syntax error"
	errOverflow  = "ERR increment or decrement would overflow"
	errNoKey     = "ERR no such key"
)

func (s *Server) dispatch(tx *engram.Tx, c *client, args [][]byte, w *W) error {
	return s.dispatchCmd(tx, c, lookupCommand(args[0]), args, w)
}

// dispatchCmd is dispatch with args[0]'s command looked up (nil: none).
func (s *Server) dispatchCmd(tx *engram.Tx, c *client, cmd *command, args [][]byte, w *W) error {
	var name string
	if cmd != nil {
		name = cmd.name
	} else {
		name = strings.ToLower(string(args[0]))
	}
	s.stats.cmds++
	c.lastCmd = name
	if cmd == nil {
		if c.multi {
			c.multiErr = true
		}
		w.Err(unknownCmd(string(args[0]), args[1:]))
		return nil
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		if c.multi {
			c.multiErr = true
		}
		w.Err("ERR wrong number of arguments for '" + name + "' command")
		return nil
	}
	if !c.authed && name != "auth" && name != "hello" && name != "quit" {
		w.Err("NOAUTH Authentication required.")
		return nil
	}
	if len(c.subs)+len(c.psubs) > 0 && c.proto == 2 && !strings.Contains(cmd.flags, "p") {
		w.Err("ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
		return nil
	}
	if !c.inExec && s.oomRefuses(cmd, c.multi, w) {
		if c.multi {
			c.multiErr = true
		}
		return nil
	}
	if c.multi && noMulti[name] {
		c.multiErr = true
		w.Err("ERR Command not allowed inside a transaction")
		return nil
	}
	if c.multi && name != "exec" && name != "discard" && name != "multi" && name != "watch" && name != "quit" && name != "reset" {
		c.queue = append(c.queue, args)
		w.Simple("QUEUED")
		return nil
	}
	if tx == nil && !cmd.regionless {
		return errNeedsRegion // only the audited reads run without a region (readonly.go)
	}
	x := s.takeCtx()
	*x = ctx{s: s, tx: tx, c: c, w: w, args: args, name: name}
	err := cmd.fn(x) //engramvet:ignore the command handlers (func(*ctx) error) are not checked: docs/engramvet.md, "On real code"
	s.putCtx(x)
	return err
}

// takeCtx returns a command context from the free list, or a new one:
// a context escapes to the heap (the command runs through a function
// value), one allocation per command without the list. EXEC dispatches
// inside a command, so more than one may be in use at once.
func (s *Server) takeCtx() *ctx {
	n := len(s.freeCtxs)
	if n == 0 {
		return new(ctx)
	}
	x := s.freeCtxs[n-1]
	s.freeCtxs = s.freeCtxs[:n-1]
	return x
}

// putCtx returns x to the free list, cleared (it must hold no client's
// arguments or pool pointers after its command). A command that panics
// never returns its context: it is garbage, as before.
func (s *Server) putCtx(x *ctx) {
	*x = ctx{}
	s.freeCtxs = append(s.freeCtxs, x)
}

// lookupCommand finds a command by name in any case without allocating
// (the map lookup of a converted stack buffer does not copy it).
func lookupCommand(b []byte) *command {
	var buf [24]byte
	if len(b) > len(buf) {
		return commands[strings.ToLower(string(b))]
	}
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return commands[string(buf[:len(b)])]
}

// lookupCommands appends the command of each of cmds (nil: unknown) to
// defs: a request's commands are looked up once, for warming and dispatch.
// A command spelled as the one before it (a pipeline of INCRs) takes its
// lookup without hashing the name again.
func lookupCommands(defs []*command, cmds [][][]byte) []*command {
	var prev []byte
	var def *command
	for _, args := range cmds {
		if prev == nil || !bytes.Equal(args[0], prev) {
			prev, def = args[0], lookupCommand(args[0])
		}
		defs = append(defs, def)
	}
	return defs
}

func unknownCmd(name string, rest [][]byte) string {
	var b strings.Builder
	b.WriteString("ERR unknown command '" + name + "', with args beginning with: ")
	for _, a := range rest {
		b.WriteString("'" + string(a) + "' ")
	}
	return b.String()
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (x *ctx) dict() *pDict { return x.s.root.DBs[x.c.db] }

func wkey(db int, k []byte) string { return strconv.Itoa(db) + "\x00" + string(k) }

// lookup finds a live key (deleting it if expired; with no transaction,
// in a read-only batch, errNeedsRegion instead: readonly.go).
func (x *ctx) lookup(k []byte) (*pEntry, error) {
	return x.s.lookupDB(x.tx, x.c.db, k)
}

func (s *Server) lookupDB(tx *engram.Tx, db int, k []byte) (*pEntry, error) {
	d := s.root.DBs[db]
	_, e := d.find(k, s.hashOf(k))
	if e == nil {
		return nil, nil
	}
	if e.Expire != 0 && e.Expire <= nowMs() {
		if tx == nil {
			if plantSkipExpiryFallback {
				return nil, nil
			}
			return nil, errNeedsRegion
		}
		s.touchKey(db, k)
		_, err := d.remove(tx, k)
		return nil, err
	}
	return e, nil
}

// typed finds a key of type t; wrong is true (and the error replied) if
// it holds another type.
// typedValue reads key k as a value of type t: ok is false on a wrong
// type (the error reply is written), a missing key gives empty() and a
// nil entry, an existing one its decoded value and entry.
func typedValue[V any](x *ctx, k []byte, t int64, empty func() V, decode func(*pEntry) V) (v V, e *pEntry, ok bool, err error) {
	e, wrong, err := x.typed(k, t)
	if err != nil || wrong {
		return v, nil, false, err
	}
	if e == nil {
		return empty(), nil, true, nil
	}
	return decode(e), e, true, nil
}

func (x *ctx) typed(k []byte, t int64) (e *pEntry, wrong bool, err error) {
	e, err = x.lookup(k)
	if err != nil || e == nil {
		return nil, false, err
	}
	if e.Type != t {
		x.w.Err(errWrongType)
		return nil, true, nil
	}
	return e, false, nil
}

func (s *Server) touchKey(db int, k []byte) {
	s.watchGen++
	if len(s.watch) == 0 {
		return // nobody WATCHes: no key string to build
	}
	key := wkey(db, k)
	if _, ok := s.watch[key]; ok {
		s.watch[key] = s.watchGen
	}
}

func (x *ctx) touch(k []byte) { x.s.touchKey(x.c.db, k) }

// markReady notes that list or sorted set k got data, for the clients
// blocked on it (none blocked: nothing to note, and no key string built).
func (x *ctx) markReady(k []byte) {
	if len(x.s.blocked) > 0 {
		x.s.ready[wkey(x.c.db, k)] = true
	}
}

// put stores a value under k (replacing any value; keepTTL keeps expiry).
func (x *ctx) put(k []byte, t int64, val []byte, keepTTL bool) (*pEntry, error) {
	return x.s.putDB(x.tx, x.c.db, k, t, val, keepTTL)
}

func (s *Server) putDB(tx *engram.Tx, db int, k []byte, t int64, val []byte, keepTTL bool) (*pEntry, error) {
	e, err := s.lookupDB(tx, db, k)
	if err != nil {
		return nil, err
	}
	return s.putFound(tx, db, k, e, t, val, keepTTL)
}

// putLooked is put for a caller that has just looked k up (e: what
// x.lookup returned, nil if absent), saving the second hash-table walk.
func (x *ctx) putLooked(k []byte, e *pEntry, t int64, val []byte, keepTTL bool) (*pEntry, error) {
	return x.s.putFound(x.tx, x.c.db, k, e, t, val, keepTTL)
}

// putFound stores val under k, whose live entry is e (nil: absent).
func (s *Server) putFound(tx *engram.Tx, db int, k []byte, e *pEntry, t int64, val []byte, keepTTL bool) (*pEntry, error) {
	s.touchKey(db, k)
	if e == nil {
		return s.root.DBs[db].add(tx, k, t, val)
	}
	if err := storeVal(tx, e, t, val, !keepTTL); err != nil {
		return nil, err
	}
	if !keepTTL {
		return e, setExpire(tx, e, 0)
	}
	return e, nil
}

// store writes a collection value as a whole (v: a list's [][]byte, a
// hash's or set's *hashv, a sorted set's *zsetv), deleting the key if it
// became empty.
func (x *ctx) store(k []byte, t int64, e *pEntry, v any, empty bool) error {
	x.touch(k)
	if empty {
		_, err := x.dict().remove(x.tx, k)
		return err
	}
	if t == tList || t == tZSet {
		x.markReady(k)
	}
	if e == nil {
		ne, err := x.put(k, t, nil, false)
		if err != nil {
			return err
		}
		e = ne
	}
	return writeValue(x.tx, &x.s.lim, e, t, v)
}

// putValue replaces whatever k holds with the collection value v.
func (x *ctx) putValue(k []byte, t int64, v any) error {
	e, err := x.put(k, t, nil, false)
	if err != nil {
		return err
	}
	if t == tList || t == tZSet {
		x.markReady(k)
	}
	return writeValue(x.tx, &x.s.lim, e, t, v)
}

func (x *ctx) del(k []byte) (bool, error) {
	e, err := x.lookup(k)
	if err != nil || e == nil {
		return false, err
	}
	x.touch(k)
	return x.dict().remove(x.tx, k)
}

// parseInt is a decimal integer argument or value: an optional sign, no
// leading zero, no "-0", within int64. A string of at most 18 digits
// after an optional '-' (any counter INCR keeps) is read here, a byte
// at a time with no overflow possible; anything else (a '+', a longer
// number, a non-digit) goes to strconv, with the same answer as before.
// The fast path was ~90 % of INCR's two parses (its own and its logging
// ahead's guess: prelog.go, guessLen): the string copy and strconv's
// generality.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 || (len(b) > 1 && b[0] == '0') || (len(b) > 1 && b[0] == '-' && b[1] == '0') {
		return 0, false
	}
	if n, ok := parseShortInt(b); ok {
		return n, true
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// parseShortInt reads b as '-'? followed by 1 to 18 decimal digits (b
// passed parseInt's checks of zeros); false for any other form, which
// parseInt leaves to strconv.
func parseShortInt(b []byte) (int64, bool) {
	d := b
	if b[0] == '-' {
		d = b[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(d) < len(b) {
		n = -n
	}
	return n, true
}

func (x *ctx) intArg(i int) (int64, bool) {
	n, ok := parseInt(x.args[i])
	if !ok {
		x.w.Err(errNotInt)
	}
	return n, ok
}

func parseFloat(b []byte) (float64, bool) {
	s := string(b)
	switch strings.ToLower(s) {
	case "inf", "+inf":
		return posInf, true
	case "-inf":
		return negInf, true
	}
	if len(s) == 0 || s[0] == ' ' || s[len(s)-1] == ' ' {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	if f != f {
		return 0, false
	}
	return f, err == nil
}

func (x *ctx) floatArg(i int) (float64, bool) {
	f, ok := parseFloat(x.args[i])
	if !ok {
		x.w.Err(errNotFloat)
	}
	return f, ok
}

func eq(a []byte, s string) bool { return strings.EqualFold(string(a), s) }
