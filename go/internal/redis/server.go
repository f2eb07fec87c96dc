// server.go: connections and the executor. On Linux the epoll front end
// (evloop_linux.go, `--io epoll`, the default) reads the connections and
// runs each loop turn's commands itself (runTurn). With `--io goroutines`
// each connection has a reader goroutine that parses every command
// already buffered (pipelining) and queues them as one request. The executor — one at a time, under execMu:
// the reader that queued the request if no batch is running (combining: no
// goroutine hand-off when the server is idle), else the executor goroutine
// it kicks — takes every request waiting (from many connections, up to
// s.batchMax commands) and runs them all in ONE pool transaction — group commit: one
// region, one commit (one msync in msync mode) for the whole batch — and
// only after that commit writes the replies (a batch of nothing but reads
// runs without a region: readonly.go). If the batch's transaction
// fails (the pool is full), it is rolled back and each request is run
// again in a transaction of its own, so only the request that does not fit
// gets the -OOM error.
//
// Durability contract: a reply to a write is sent only after the region
// holding it committed, i.e. is durable.
//
// Crash behaviour: a kill at any point loses at most the batch being
// committed, none of whose replies has been sent.
//
// Invariant (no request left waiting): whoever releases execMu looks at the
// queue again afterwards and runs it or kicks the executor goroutine; a
// reader that fails to take execMu leaves its request to the holder.
package redis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	engram "github.com/engram-pm/engram-go"
)

// maxBatch is the most commands one batch (one region, one commit) takes
// where a commit is a flush + fence (pmem): more would only delay the
// first replies. Where a commit is a device flush (wal, msync: an
// fdatasync or msync of about a millisecond) a batch takes up to
// maxSyncBatch, so 50 clients pipelining 16 commands each share one
// flush, as redis-server's appendfsync always shares one fsync per
// event-loop turn (docs/bench/redis.md).
const (
	maxBatch     = 256
	maxSyncBatch = 4096
)

// Config is the server's settings (flags and CONFIG GET/SET).
type Config struct {
	Addr        string // host:port
	Pool        string // pool file
	MaxMemory   uint64 // the pool's maximum size (0: engine default)
	RequirePass string
	Durability  engram.Durability
	MaxClients  int // connections beyond are refused as Redis does (0: 10000)
	// Handoff: every batch runs on the executor goroutine (the design before
	// combining; ENGRAM_REDIS_HANDOFF=1, for before/after measurements).
	Handoff bool
	// IO: how connections are read: "epoll" (event loops, evloop_linux.go;
	// the default on Linux) or "goroutines" (a reader goroutine per
	// connection; the default elsewhere, and whenever Handoff is set).
	IO string
	// IOLoops: the number of epoll event loops (0: 1).
	IOLoops int
	// EagerRecoveryGC: after a crash, collect the crash's garbage in the
	// open, before the server answers (--recovery-gc eager). By default
	// it runs in the background while the server answers (the engine's
	// region card table: every pool write of the server is in a region).
	EagerRecoveryGC bool
}

// Server is one engram-redis instance.
type Server struct {
	cfg          Config
	pool         *engram.Pool
	root         *pRoot
	ln           net.Listener
	reqs         chan *request
	nextID       atomic.Int64
	softMax      uint64            // CONFIG SET maxmemory (maxmem.go); 0: none
	maxmemory    uint64            // what CONFIG GET maxmemory reports: --maxmemory, then the last CONFIG SET
	hasPass      atomic.Bool       // cfg.RequirePass != "", for the readers (CONFIG SET changes it in the executor)
	clients      map[int64]*client // executor-owned
	warmRefs     []warmRef         // warm.go's scratch (executor-owned)
	warmSink     uint64            // what warm.go read (kept so the loads stay)
	keyHints     []keyHint         // per command of the running request: its first key's hash (warm.go)
	hint         keyHint           // the running command's (executor-owned, like the two above)
	prelogBuf    []uint64          // prelog.go's ranges (executor-owned)
	zbuf         zwarmBuf          // zwarm's lookups and walks (zwarm.go; executor-owned)
	zhints       zhints            // the running region's ZADD moves' paths (zhint.go; executor-owned, empty outside runBatch's and runAlone's regions)
	freeCtxs     []*ctx            // dispatch's command contexts not in use (executor-owned)
	mu           sync.Mutex        // guards conns for Close
	conns        map[int64]*client
	start        time.Time
	open         openInfo // what the open did (persistinfo.go)
	lastSave     int64
	watch        map[string]int64 // db/key -> version (executor-owned)
	watchGen     int64
	pubsub       pubsubState
	blocked      map[*client]*blockState
	ready        map[string]bool // db/key of lists pushed in this batch
	unblocks     []unblockReq    // CLIENT UNBLOCKs to carry out after the batch commits
	killed       []*client       // clients CLIENT KILL closes after the batch's replies
	closed       chan struct{}
	stats        struct{ cmds, conns, batches, batchCmds, readOnly, keyspaceHits, keyspaceMiss int64 }
	done         sync.WaitGroup
	shutdown     atomic.Bool
	execMu       sync.Mutex    // held while a batch runs: guards every executor-owned field
	kick         chan struct{} // wakes the executor goroutine: requests wait
	stopped      atomic.Bool   // set under execMu by Close: no batch runs any more
	closeOnce    atomic.Bool
	fatal        atomic.Pointer[error] // why the server must stop (failServing)
	needCollect  bool
	blockSeq     int64
	shutdownReq  bool
	expireCursor [numDBs]uint64
	lim          limits    // encoding thresholds (CONFIG SET *-max-*)
	batchMax     int       // commands per batch: maxBatch, or maxSyncBatch when a commit syncs a device
	gcSeen       int64     // gcGen when this server last collected
	loops        []*evLoop // the epoll front end's loops (nil: reader goroutines)
}

type client struct {
	id       int64
	conn     net.Conn
	rc       syscall.RawConn // conn's descriptor (nil if not a socket): raw reads and writes
	wmu      sync.Mutex
	out      []byte // replies the socket did not take yet (wmu; clientout.go)
	flushing bool   // a flusher goroutine is writing out (wmu)
	// hangAfter: hang up once the backlog is out (wmu; closeAfterReplies).
	hangAfter bool
	proto     int
	db        int
	name      string
	authed    bool
	multi     bool
	queue     [][][]byte
	multiErr  bool
	watched   map[string]int64
	dirty     bool // a watched key changed
	subs      map[string]bool
	psubs     map[string]bool
	pending   []*request // requests held while blocked
	closing   bool
	inExec    bool
	addr      string
	created   time.Time
	lastCmd   string
	replyBuf  []byte // its spare reply buffer (executor-owned; clientout.go, takeReplyBuf)
}

type request struct {
	c    *client
	at   int64 // when its data arrived (Unix ns, arrival.go)
	cmds [][][]byte
	kind int // reqCommands, reqClose, reqWake
	out  W
	lone loneWarm // what warmLone found for it (warm.go)
}

const (
	reqCommands = iota
	reqClose
	reqWake
)

// layoutName is the pool layout this server reads and writes, checked by
// the engine on every open (ErrWrongLayout). Its version changes when a
// structure's bytes change in a way the type table cannot tell (the
// engine sees a skiplist node as an array of pZLevel whatever its Go
// struct says):
//
//	1 "engram-redis": until redis8zn (fixed 128-byte skiplist nodes);
//	2 "engram-redis/2": skiplist nodes sized by their level (pzset.go);
//	3 "engram-redis/3": a sorted set's member table chained through its
//	  skiplist nodes, no table entry per member (pzset.go, pztable.go);
//	4 "engram-redis/4": a skiplist's spans are not logged, trusted only
//	  while its header's stamp is the pool's epoch (pzset.go, ranked): an
//	  older server would trust spans this one left stale;
//	5 "engram-redis/5": a list's chunks hold their elements packed in one
//	  byte array (plist.go), not a slot array of element arrays;
//	6 "engram-redis/6": a key's entry holds its key and a short value
//	  inline (entry.go): an older server would read them as empty;
//	7 "engram-redis/7": a skiplist link holds its next node's score
//	  (pzset.go, pZLevel.FScore), a node's score beside its member;
//	8 "engram-redis/8": a big hash's or set's field entry holds its field
//	  and a short value inline (entry.go, phash.go): an older server
//	  would read them as empty; keys, fields and members hash 8 bytes at
//	  a time (store.go's hashKey, FNV-1a before): every bucket moved; a
//	  skiplist level's span comes after its link's score (pZLevel: Fwd,
//	  FScore, Span), so a change logs the link and score alone (zlog.go):
//	  an older server would read spans as scores.
const (
	layoutVersion = 8
	layoutName    = "engram-redis/8"
)

// oldLayouts are the earlier versions' layout names and what changed
// since each (openError's message).
var oldLayouts = []struct{ name, change string }{
	{"engram-redis", "version 1 is the layout before the sorted sets' variable-size nodes"},
	{"engram-redis/2", "version 2 is the layout before the sorted sets' member table of nodes"},
	{"engram-redis/3", "version 3 is the layout before the sorted sets' unlogged spans"},
	{"engram-redis/4", "version 4 is the layout before the lists' packed chunks"},
	{"engram-redis/5", "version 5 is the layout before the keys' inline entries"},
	{"engram-redis/6", "version 6 is the layout before the sorted sets' scores in their links"},
	{"engram-redis/7", "version 7 is the layout before the hashes' and sets' inline field entries, the word-at-a-time key hash and the sorted sets' spans after their links' scores"},
}

// New opens (or creates) the pool and builds the server.
func New(cfg Config) (*Server, error) {
	opts := &engram.Options{Layout: layoutName, MaxSize: cfg.MaxMemory, Durability: cfg.Durability, RecoveryGC: recoveryGCPolicy(cfg)}
	t0 := time.Now()
	pool, first, err := engram.Open(cfg.Pool, opts)
	if err != nil {
		return nil, openError(cfg.Pool, err)
	}
	return newOnPool(cfg, pool, first, t0)
}

// newOnPool is New on an open pool (first: it was just created; t0: when
// the open began), which the server then owns (closed on an error).
func newOnPool(cfg Config, pool *engram.Pool, first bool, t0 time.Time) (*Server, error) {
	var err error
	s := &Server{cfg: cfg, pool: pool, lim: defaultLimits, reqs: make(chan *request, 1024), clients: map[int64]*client{},
		conns: map[int64]*client{}, start: time.Now(), watch: map[string]int64{},
		blocked: map[*client]*blockState{}, ready: map[string]bool{}, closed: make(chan struct{}), kick: make(chan struct{}, 1)}
	s.maxmemory = cfg.MaxMemory
	s.batchMax = maxBatch
	if m := pool.Mode(); m == engram.Wal || m == engram.Msync {
		s.batchMax = maxSyncBatch
	}
	s.pubsub.init()
	s.hasPass.Store(cfg.RequirePass != "")
	err = pool.Txn(func(tx *engram.Tx) error {
		s.root, err = openRoot(tx, pool)
		return err
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pool root: %w", err)
	}
	s.open = openInfo{took: time.Since(t0), created: first}
	if s.open.rep, err = pool.OpenReport(); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open report: %w", err)
	}
	s.lastSave = time.Now().Unix()
	return s, nil
}

// openError is the error of a pool that did not open; a pool of an older
// engram-redis's layout is named with both versions (any other layout
// keeps the engine's message, which names the layout found).
func openError(path string, err error) error {
	for _, old := range oldLayouts {
		if errors.Is(err, engram.ErrWrongLayout) && strings.Contains(err.Error(), fmt.Sprintf("pool layout is %q,", old.name)) {
			return fmt.Errorf("open pool %s: this engram-redis reads pool layout version %d (%q); %s (%q): move the data with the engram-redis that wrote it (DUMP/RESTORE, or a client's copy) into a new pool: %w",
				path, layoutVersion, layoutName, old.change, old.name, err)
		}
	}
	return fmt.Errorf("open pool %s: %w", path, err)
}

// Listen binds the address (and creates the epoll loops); Serve then
// accepts until Close.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	s.ln = ln
	if s.ioMode() == "epoll" {
		if s.loops, err = newLoops(s, max(s.cfg.IOLoops, 1)); err != nil {
			ln.Close()
			return fmt.Errorf("epoll front end: %w", err)
		}
	}
	return nil
}

// ioMode is the front end in use: "epoll" or "goroutines".
func (s *Server) ioMode() string {
	if s.cfg.IO == "goroutines" || s.cfg.Handoff || !ioEpollAvailable {
		return "goroutines"
	}
	return "epoll"
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve runs the executor and accepts connections until Close.
func (s *Server) Serve() error {
	s.done.Add(1 + len(s.loops))
	go s.executor()
	for _, l := range s.loops {
		go l.run()
	}
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if f := s.fatal.Load(); f != nil {
				return *f
			}
			if s.shutdown.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				time.Sleep(10 * time.Millisecond) // out of descriptors: wait for a close
				continue
			}
			return err
		}
		s.handle(conn)
	}
}

// logOut is where the server logs what goes wrong while it serves
// (swapped in tests).
var logOut io.Writer = os.Stderr

// failServing stops a server that can no longer serve (an event loop's
// epoll_wait failed): it logs err at once, and Serve returns it (the
// listener is closed, which ends Accept), so Run closes the pool cleanly
// and engram-redis exits with status 1, as a user would want rather than a
// server that silently stops answering. The first error wins.
func (s *Server) failServing(err error) {
	if !s.fatal.CompareAndSwap(nil, &err) {
		return
	}
	fmt.Fprintf(logOut, "engram-redis: %v; shutting down\n", err)
	if s.ln != nil {
		s.ln.Close()
	}
}

// Close stops the server and closes the pool cleanly.
func (s *Server) Close() error {
	if s.closeOnce.Swap(true) {
		return nil
	}
	s.shutdown.Store(true)
	if s.ln != nil {
		s.ln.Close()
	}
	close(s.closed)
	for _, l := range s.loops {
		l.wakeUp()
	}
	s.done.Wait()
	s.execMu.Lock()
	s.stopped.Store(true)
	s.execMu.Unlock()
	s.mu.Lock()
	for _, c := range s.conns {
		c.conn.Close()
	}
	s.mu.Unlock()
	// A background recovery GC still running finishes first: closed before
	// it, the pool would be left to recover again on the next start.
	_, _ = s.pool.WaitRecoveryGC()
	return s.pool.Close()
}

func (s *Server) handle(conn net.Conn) {
	c := &client{id: s.nextID.Add(1), conn: conn, proto: 2,
		authed: !s.hasPass.Load(), addr: conn.RemoteAddr().String(), created: time.Now()}
	if sc, ok := conn.(syscall.Conn); ok {
		c.rc, _ = sc.SyscallConn()
	}
	s.mu.Lock()
	full := len(s.conns) >= s.maxClients()
	if !full {
		s.conns[c.id] = c
	}
	s.mu.Unlock()
	if full {
		conn.Write([]byte("-ERR max number of clients reached\r\n"))
		conn.Close()
		return
	}
	if len(s.loops) > 0 {
		s.handleEpoll(c)
		return
	}
	go s.readLoop(c)
}

// handleEpoll moves the connection to an event loop (its descriptor out
// of Go's poller: fdconn_linux.go); if that fails the connection is
// closed.
func (s *Server) handleEpoll(c *client) {
	f, err := detach(c.conn)
	if err == nil {
		c.conn, c.rc = f, f.raw()
		if err = s.loops[int(c.id)%len(s.loops)].add(c); err == nil {
			return
		}
	}
	c.conn.Close()
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
}

func (s *Server) maxClients() int {
	if s.cfg.MaxClients > 0 {
		return s.cfg.MaxClients
	}
	return 10000
}

// raiseFDLimit lifts the open-file limit to what maxclients needs (as
// Redis does: maxclients + 32), the hard limit too if the process may.
func raiseFDLimit(want uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur >= want {
		return l.Cur, nil
	}
	if l.Max < want {
		nl := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &nl) == nil {
			return want, nil
		}
	}
	l.Cur = min(want, l.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}

func (s *Server) readLoop(c *client) {
	src, arrived := arrivalReader(c.conn)
	r := bufio.NewReaderSize(src, 8<<10)
	var arena argArena
	defer func() {
		// The executor closes the connection after the replies to what
		// was read before (the close request queues behind them).
		s.mu.Lock()
		delete(s.conns, c.id)
		s.mu.Unlock()
		s.submit(&request{c: c, kind: reqClose, at: arrived()})
	}()
	for {
		var cmds [][][]byte
		for {
			args, err := readCommandIn(r, &arena)
			if err != nil {
				// The whole commands before a protocol error or the
				// end of the connection still run.
				if len(cmds) > 0 {
					s.submit(&request{c: c, cmds: cmds, at: arrived()})
				}
				var pe protoError
				if errors.As(err, &pe) {
					c.write([]byte("-" + pe.Error() + "\r\n"))
				}
				return
			}
			if len(args) > 0 {
				cmds = append(cmds, args)
			}
			if r.Buffered() == 0 || len(cmds) >= s.batchMax {
				break
			}
		}
		if len(cmds) > 0 && !s.submit(&request{c: c, cmds: cmds, at: arrived()}) {
			return
		}
	}
}

func (s *Server) submit(r *request) bool {
	select {
	case s.reqs <- r:
	case <-s.closed:
		return false
	}
	s.combine()
	return true
}

// combine runs one batch on the calling goroutine if no batch is running;
// requests still waiting after it go to the executor goroutine (so a
// reader does not serve others for long while its own client waits).
func (s *Server) combine() {
	if s.cfg.Handoff {
		return
	}
	for first := true; len(s.reqs) > 0; first = false {
		if !first {
			s.kickExecutor()
			return
		}
		if !s.execMu.TryLock() {
			return // the holder looks at the queue after it unlocks
		}
		if !s.stopped.Load() {
			s.runNext()
		}
		s.execMu.Unlock()
	}
}

func (s *Server) kickExecutor() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// runWaiting runs batches until the queue is empty (execMu held).
func (s *Server) runWaiting() {
	for !s.stopped.Load() && s.runNext() {
	}
}

func (s *Server) executor() {
	defer s.done.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var reqs chan *request // only with Handoff: the executor takes every request
	if s.cfg.Handoff {
		reqs = s.reqs
	}
	for {
		select {
		case <-s.closed:
			return
		case <-tick.C:
			s.execMu.Lock()
			if !s.stopped.Load() {
				s.activeExpire()
				s.expireBlocked()
				s.runWaiting()
			}
			s.execMu.Unlock()
		case <-s.kick:
			s.execMu.Lock()
			s.runWaiting()
			s.execMu.Unlock()
		case r := <-reqs:
			s.execMu.Lock()
			s.runFrom(r)
			s.execMu.Unlock()
		}
		if !s.cfg.Handoff && len(s.reqs) > 0 {
			s.kickExecutor() // queued while this goroutine held execMu
		}
	}
}

// runTurn runs the requests one epoll loop turn read, in the order read,
// after any request queued before, in batches of at most s.batchMax
// commands (one region and commit each).
func (s *Server) runTurn(turn []*request) {
	s.execMu.Lock()
	defer s.execMu.Unlock()
	if s.stopped.Load() {
		return
	}
	s.runWaiting()
	for i := 0; i < len(turn); {
		j, n := i+1, len(turn[i].cmds)
		for j < len(turn) && n+len(turn[j].cmds) <= s.batchMax {
			n += len(turn[j].cmds)
			j++
		}
		s.runBatch(turn[i:j])
		i = j
	}
}

// runNext runs one batch from the queue; false if it was empty.
func (s *Server) runNext() bool {
	select {
	case r := <-s.reqs:
		s.runFrom(r)
		return true
	default:
		return false
	}
}

// runFrom runs r and every request waiting behind it (up to s.batchMax
// commands) as one batch.
func (s *Server) runFrom(r *request) {
	batch := []*request{r}
	n := len(r.cmds)
	batch = s.drainMore(batch, n)
	if hasBlocking(batch) || len(s.blocked) > 0 {
		// Readers woken with this one may not have submitted yet:
		// give them a moment, then run the batch in arrival order
		// (also while a client is blocked: any write may serve it,
		// and a WATCHing EXEC sent before that write must run first).
		time.Sleep(200 * time.Microsecond)
		batch = s.drainMore(batch, batchLen(batch))
		orderByArrival(batch)
	}
	s.runBatch(batch)
}

func batchLen(batch []*request) int {
	n := 0
	for _, r := range batch {
		n += len(r.cmds)
	}
	return n
}

func (s *Server) drainMore(batch []*request, n int) []*request {
	for n < s.batchMax {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			n += len(r.cmds)
		default:
			return batch
		}
	}
	return batch
}

// runBatch runs the batch's requests in one transaction and replies after
// the commit; on failure, each request alone. A batch of reads runs
// without a transaction (readonly.go) unless one of them must write.
func (s *Server) runBatch(batch []*request) {
	var live, closes []*request
	defer func() {
		// Closes come after the replies to what the client sent before.
		for _, r := range closes {
			s.dropClient(r.c)
		}
	}()
	for _, r := range batch {
		switch r.kind {
		case reqClose:
			closes = append(closes, r)
		default:
			if _, ok := s.blocked[r.c]; ok && r.kind == reqCommands {
				r.c.pending = append(r.c.pending, r)
				continue
			}
			if s.clients[r.c.id] == nil {
				s.clients[r.c.id] = r.c
			}
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	s.stats.batches++
	for _, r := range live {
		s.stats.batchCmds += int64(len(r.cmds))
	}
	saved := make([]clientState, len(live))
	for i, r := range live {
		saved[i] = r.c.save()
	}
	if readOnlyBatch(live) && s.runReadOnly(live, saved) {
		s.stats.readOnly++
		s.afterCommit(live)
		return
	}
	err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequests(tx, live) })
	s.zhints.reset() // none outlives its region (zhint.go)
	if err != nil {
		// The batch runs again request by request.
		s.undoBatch(live, saved)
		for _, r := range live {
			s.runAlone(r)
		}
	}
	s.afterCommit(live)
}

// undoBatch drops what a failed run of live did outside the pool: its
// replies, its clients' state changes (saved: as before it), its kills.
func (s *Server) undoBatch(live []*request, saved []clientState) {
	for _, c := range s.killed {
		c.closing = false
	}
	s.killed = s.killed[:0]
	for i, r := range live {
		r.c.restore(saved[i])
		r.out.b = r.out.b[:0]
	}
}

// runRequests runs a batch's live requests in order in tx, their lone
// commands warmed together first (warmLone).
func (s *Server) runRequests(tx *engram.Tx, live []*request) error {
	if err := s.warmBatch(tx, live); err != nil {
		return err
	}
	for _, r := range live {
		if err := s.runRequest(tx, r); err != nil {
			return err
		}
	}
	return nil
}

// warmBatch is warmLone under a recover, as runRequest runs a request's
// own warming: a bug there rolls the region back (and the batch runs
// again request by request) instead of taking the server down.
func (s *Server) warmBatch(tx *engram.Tx, live []*request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error in warming: %v", p)
		}
	}()
	return s.warmLone(tx, live)
}

func (s *Server) runAlone(r *request) {
	st := r.c.save()
	err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, r) })
	s.zhints.reset() // none outlives its region (zhint.go)
	if err != nil {
		r.c.restore(st)
		r.out = W{proto: r.c.proto}
		for range r.cmds {
			r.out.Err(errReply(err))
		}
	}
}

func errReply(err error) string {
	if errors.Is(err, engram.ErrPoolFull) {
		return "OOM command not allowed when used memory > 'maxmemory'."
	}
	return "ERR engram: " + strings.ReplaceAll(err.Error(), "\n", " ")
}

// afterCommit sends replies, then serves blocked clients whose keys got data.
func (s *Server) afterCommit(live []*request) {
	for _, r := range live {
		if len(r.out.b) > 0 {
			r.c.write(r.out.b)
		}
		r.c.keepReplyBuf(r.out.b)
		r.out.b = nil
		if r.c.closing {
			r.c.closeAfterReplies()
		}
	}
	// Clients CLIENT KILL named: after the replies to what they ran.
	for _, c := range s.killed {
		c.closeAfterReplies()
	}
	clear(s.killed)
	s.killed = s.killed[:0]
	if len(s.ready) > 0 {
		s.serveBlocked()
	}
	if len(s.unblocks) > 0 {
		s.runUnblocks()
	}
	if s.shutdownReq && !s.shutdown.Swap(true) {
		s.ln.Close()
	}
}

func (c *client) multiInExec() bool { return c.inExec }

func pid() int { return os.Getpid() }

type clientState struct {
	db, proto   int
	multi, dirt bool
	closing     bool
	queue       [][][]byte
	multiErr    bool
}

func (c *client) save() clientState {
	return clientState{c.db, c.proto, c.multi, c.dirty, c.closing, c.queue, c.multiErr}
}

func (c *client) restore(st clientState) {
	c.db, c.proto, c.multi, c.dirty, c.closing, c.queue, c.multiErr = st.db, st.proto, st.multi, st.dirt, st.closing, st.queue, st.multiErr
}

// runRequest executes a request's commands into r.out. An engram error
// (pool full) aborts the transaction.
func (s *Server) runRequest(tx *engram.Tx, r *request) (err error) {
	defer func() {
		// A bug in a command must not take the server down: the region
		// is rolled back and the request answered with an error.
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error in command: %v", p)
		}
		s.dropHints()
	}()
	b := r.out.b[:0]
	if b == nil {
		b = r.c.takeReplyBuf()
	}
	r.out = W{b: b, proto: r.c.proto}
	var buf [32]*command // a pipeline of up to 32 commands: no allocation
	defs := r.lone.defs(buf[:0], r.cmds)
	if err := s.warmRequest(tx, r, defs); err != nil { // under the recover above, as the commands
		return err
	}
	for i, args := range r.cmds {
		if r.c.closing {
			// After QUIT (or CLIENT KILL) nothing more runs, as in Redis.
			return nil
		}
		if _, blocked := s.blocked[r.c]; blocked {
			// The rest waits until the blocking command is served.
			r.c.pending = append(r.c.pending, &request{c: r.c, cmds: r.cmds[i:]})
			return nil
		}
		s.hint = s.hintAt(i)
		if err := s.dispatchCmd(tx, r.c, defs[i], args, &r.out); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) dropClient(c *client) {
	c.conn.Close()
	delete(s.clients, c.id)
	delete(s.blocked, c)
	s.pubsub.drop(c)
	c.watched = nil
}

// Run is the command-line entry: serve until SHUTDOWN or a signal.
func Run(cfg Config, logw io.Writer) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	if err := s.Listen(); err != nil {
		s.pool.Close()
		return err
	}
	want := uint64(s.maxClients()) + 32
	if got, err := raiseFDLimit(want); err != nil || got < want {
		fmt.Fprintf(logw, "engram-redis: open-file limit %d is below maxclients+32 = %d (%v); connections beyond it wait\n", got, want, err)
	}
	fmt.Fprintf(logw, "engram-redis: pool %s (durability %s), %s, listening on %s\n", cfg.Pool, durabilityName(s.pool.Mode()), s.open, s.Addr())
	err = s.Serve()
	if cerr := s.Close(); err == nil && cerr != nil && !errors.Is(cerr, engram.ErrClosed) {
		err = cerr
	}
	return err
}

// exit is swapped in tests.
var exit = os.Exit
