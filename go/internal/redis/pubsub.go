// pubsub.go: volatile pub/sub (as in Redis, nothing is persisted) and
// blocking list pops (BLPOP/BRPOP/BLMOVE): a blocked client is parked in
// the executor; after a batch pushes to one of its keys it is served in a
// transaction of its own; a timer wakes it with a nil reply at timeout.
//
// Crash behaviour: a served blocked pop is one region, acknowledged after
// its commit; messages and subscriptions vanish with the process.
package redis

import (
	"sort"
	"strconv"
	"strings"
	"time"

	engram "github.com/engram-pm/engram-go"
)

type pubsubState struct {
	chans map[string]map[*client]bool
	pats  map[string]map[*client]bool
}

func (p *pubsubState) init() {
	p.chans = map[string]map[*client]bool{}
	p.pats = map[string]map[*client]bool{}
}

func (p *pubsubState) sub(x *ctx, pat bool) {
	c := x.c
	for _, ch := range x.args[1:] {
		name := string(ch)
		m, mine, kind := p.chans, &c.subs, "subscribe"
		if pat {
			m, mine, kind = p.pats, &c.psubs, "psubscribe"
		}
		if *mine == nil {
			*mine = map[string]bool{}
		}
		(*mine)[name] = true
		if m[name] == nil {
			m[name] = map[*client]bool{}
		}
		m[name][c] = true
		x.w.Push(3)
		x.w.BulkS(kind)
		x.w.BulkS(name)
		x.w.Int(int64(len(c.subs) + len(c.psubs)))
	}
}

func (p *pubsubState) unsub(x *ctx, pat bool) {
	c := x.c
	m, mine, kind := p.chans, &c.subs, "unsubscribe"
	if pat {
		m, mine, kind = p.pats, &c.psubs, "punsubscribe"
	}
	names := x.args[1:]
	if len(names) == 0 {
		for n := range *mine {
			names = append(names, []byte(n))
		}
	}
	if len(names) == 0 {
		x.w.Push(3)
		x.w.BulkS(kind)
		x.w.Null()
		x.w.Int(int64(len(c.subs) + len(c.psubs)))
		return
	}
	for _, ch := range names {
		name := string(ch)
		delete(*mine, name)
		delete(m[name], c)
		if len(m[name]) == 0 {
			delete(m, name)
		}
		x.w.Push(3)
		x.w.BulkS(kind)
		x.w.BulkS(name)
		x.w.Int(int64(len(c.subs) + len(c.psubs)))
	}
}

// publish delivers now (pub/sub is volatile and not part of a region).
func (p *pubsubState) publish(ch, msg []byte) int64 {
	n := int64(0)
	for c := range p.chans[string(ch)] {
		w := W{proto: c.proto}
		w.Push(3)
		w.BulkS("message")
		w.Bulk(ch)
		w.Bulk(msg)
		c.write(w.b)
		n++
	}
	for pat, cs := range p.pats {
		if !globMatch([]byte(pat), ch, false) {
			continue
		}
		for c := range cs {
			w := W{proto: c.proto}
			w.Push(4)
			w.BulkS("pmessage")
			w.BulkS(pat)
			w.Bulk(ch)
			w.Bulk(msg)
			c.write(w.b)
			n++
		}
	}
	return n
}

func (p *pubsubState) drop(c *client) {
	for n := range c.subs {
		delete(p.chans[n], c)
		if len(p.chans[n]) == 0 {
			delete(p.chans, n)
		}
	}
	for n := range c.psubs {
		delete(p.pats[n], c)
		if len(p.pats[n]) == 0 {
			delete(p.pats, n)
		}
	}
	c.subs, c.psubs = nil, nil
}

// blockState is a parked blocking command.
type blockState struct {
	db       int
	args     [][]byte
	keys     []string
	deadline time.Time // zero: forever
	seq      int64     // clients are served in the order they blocked
	typ      int64     // the type a key must hold to wake it (list, zset)
}

// block parks the client: the command is retried when a key gets data.
func (x *ctx) block(keys [][]byte, timeout float64) {
	x.s.blockSeq++
	b := &blockState{db: x.c.db, args: x.args, seq: x.s.blockSeq, typ: tList}
	if strings.HasPrefix(x.name, "bz") {
		b.typ = tZSet
	}
	for _, k := range keys {
		b.keys = append(b.keys, wkey(x.c.db, k))
	}
	if timeout > 0 {
		b.deadline = time.Now().Add(time.Duration(timeout * float64(time.Second)))
	}
	x.s.blocked[x.c] = b
}

// serveBlocked retries parked commands whose keys were pushed to.
func (s *Server) serveBlocked() {
	// Serving one client can push to another's key (BLMOVE into a list a
	// BLPOP waits on): repeat while that made keys ready.
	for round := 0; round < 64 && len(s.ready) > 0; round++ {
		s.serveReady()
	}
}

func (s *Server) serveReady() {
	ready := s.ready
	s.ready = map[string]bool{}
	waiting := make([]*client, 0, len(s.blocked))
	for c := range s.blocked {
		waiting = append(waiting, c)
	}
	sort.Slice(waiting, func(i, j int) bool { return s.blocked[waiting[i]].seq < s.blocked[waiting[j]].seq })
	for _, c := range waiting {
		b, still := s.blocked[c]
		if !still {
			continue
		}
		hit := false
		for _, k := range b.keys {
			// Only a key that now holds a list wakes the client (a key
			// pushed to and then replaced by a string does not).
			hit = hit || (ready[k] && s.holds(k, b.typ))
		}
		if hit {
			s.retryBlocked(c, b, false)
		}
	}
}

func (s *Server) retryBlocked(c *client, b *blockState, timedOut bool) {
	delete(s.blocked, c)
	r := &request{c: c, out: W{proto: c.proto}}
	if timedOut {
		r.out.NullArray()
	} else {
		db := c.db
		err := s.pool.Txn(func(tx *engram.Tx) error {
			c.db = b.db
			defer func() { c.db = db }()
			return s.dispatch(tx, c, b.args, &r.out)
		})
		if err != nil {
			r.out.b = r.out.b[:0]
			r.out.Err(errReply(err))
		}
		if _, again := s.blocked[c]; again {
			return // still nothing: parked again
		}
	}
	s.deliver(c, r.out.b)
}

// deliver writes a parked client's reply and runs what it sent meanwhile.
func (s *Server) deliver(c *client, reply []byte) {
	c.write(reply)
	pending := c.pending
	c.pending = nil
	for _, p := range pending {
		s.runBatch([]*request{p})
	}
}

// runUnblocks carries out the CLIENT UNBLOCKs of the batch just committed
// (outside its transaction): a timeout reply, or the UNBLOCKED error.
func (s *Server) runUnblocks() {
	reqs := s.unblocks
	s.unblocks = nil
	for _, u := range reqs {
		if _, ok := s.blocked[u.c]; !ok {
			continue
		}
		delete(s.blocked, u.c)
		out := W{proto: u.c.proto}
		if u.err {
			out.Err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
		} else {
			out.NullArray()
		}
		s.deliver(u.c, out.b)
	}
}

// unblockReq is a CLIENT UNBLOCK waiting for its batch to commit.
type unblockReq struct {
	c   *client
	err bool
}

// clientUnblock: CLIENT UNBLOCK id [TIMEOUT|ERROR] answers 1 if the
// client is blocked (it is unblocked after this batch commits), else 0.
func clientUnblock(x *ctx) {
	if len(x.args) != 3 && len(x.args) != 4 {
		x.w.Err("ERR wrong number of arguments for 'client|unblock' command")
		return
	}
	id, ok := x.intArg(2)
	if !ok {
		return
	}
	isErr := false
	if len(x.args) == 4 {
		switch {
		case eq(x.args[3], "error"):
			isErr = true
		case eq(x.args[3], "timeout"):
		default:
			x.w.Err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return
		}
	}
	c := x.s.clients[id]
	if c == nil {
		x.w.Int(0)
		return
	}
	if _, blocked := x.s.blocked[c]; !blocked {
		x.w.Int(0)
		return
	}
	x.s.unblocks = append(x.s.unblocks, unblockReq{c: c, err: isErr})
	x.w.Int(1)
}

func (s *Server) expireBlocked() {
	now := time.Now()
	for c, b := range s.blocked {
		if !b.deadline.IsZero() && now.After(b.deadline) {
			s.retryBlocked(c, b, true)
		}
	}
}

func (s *Server) holds(wk string, t int64) bool {
	i := strings.IndexByte(wk, 0)
	db, _ := strconv.Atoi(wk[:i])
	k := []byte(wk[i+1:])
	_, e := s.root.DBs[db].find(k, hashKey(k))
	return e != nil && e.Type == t && (e.Expire == 0 || e.Expire > nowMs())
}
