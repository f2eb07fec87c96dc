// cmd_server.go: connection and server commands (PING, HELLO, AUTH,
// SELECT, INFO, CONFIG, CLIENT, MULTI/EXEC, FLUSHDB, ...), active expiry
// and pub/sub (volatile, as in Redis).
//
// Crash behaviour: EXEC runs its queue inside the batch's transaction,
// so a MULTI block is one failure-atomic region (or part of one shared
// group-commit region); FLUSHDB swaps in a fresh table in the same way.
package redis

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	engram "github.com/engram-pm/engram-go"
)

var posInf, negInf = math.Inf(1), math.Inf(-1)

func init() {
	reg("ping", -1, "ap", k0, cmdPing)
	reg("echo", 2, "a", k0, func(x *ctx) error { x.w.Bulk(x.args[1]); return nil })
	reg("quit", -1, "ap", k0, func(x *ctx) error { x.w.OK(); x.c.closing = true; return nil })
	reg("hello", -1, "a", k0, cmdHello)
	reg("auth", -2, "a", k0, cmdAuth)
	reg("select", 2, "a", k0, cmdSelect)
	reg("dbsize", 1, "r", k0, func(x *ctx) error { x.w.Int(x.dict().Used); return nil })
	reg("flushdb", -1, "w", k0, func(x *ctx) error { return x.flush(x.c.db, x.c.db+1) })
	reg("flushall", -1, "w", k0, func(x *ctx) error { return x.flush(0, numDBs) })
	reg("time", 1, "a", k0, cmdTime)
	reg("lastsave", 1, "a", k0, func(x *ctx) error { x.w.Int(x.s.lastSave); return nil })
	reg("save", 1, "a", k0, cmdSave)
	reg("bgsave", -1, "a", k0, func(x *ctx) error { x.w.Simple("Background saving started"); return nil })
	reg("bgrewriteaof", 1, "a", k0, func(x *ctx) error {
		x.w.Simple("Background append only file rewriting started")
		return nil
	})
	reg("shutdown", -1, "a", k0, cmdShutdown)
	reg("reset", 1, "ap", k0, cmdReset)
	reg("info", -1, "a", k0, cmdInfo)
	reg("config", -2, "a", k0, cmdConfig)
	reg("client", -2, "a", k0, cmdClient)
	reg("command", -1, "a", k0, cmdCommand)
	reg("multi", 1, "a", k0, cmdMulti)
	reg("exec", 1, "a", k0, cmdExec)
	reg("discard", 1, "a", k0, cmdDiscard)
	reg("watch", -2, "a", kAll, cmdWatch)
	reg("unwatch", 1, "a", k0, func(x *ctx) error { x.c.watched = nil; x.c.dirty = false; x.w.OK(); return nil })
	reg("subscribe", -2, "ap", k0, func(x *ctx) error { x.s.pubsub.sub(x, false); return nil })
	reg("psubscribe", -2, "ap", k0, func(x *ctx) error { x.s.pubsub.sub(x, true); return nil })
	reg("unsubscribe", -1, "ap", k0, func(x *ctx) error { x.s.pubsub.unsub(x, false); return nil })
	reg("punsubscribe", -1, "ap", k0, func(x *ctx) error { x.s.pubsub.unsub(x, true); return nil })
	reg("publish", 3, "a", k0, func(x *ctx) error { x.w.Int(x.s.pubsub.publish(x.args[1], x.args[2])); return nil })
	reg("memory", -2, "r", k0, cmdMemory)
	reg("function", -2, "a", k0, func(x *ctx) error { x.w.OK(); return nil })
	reg("script", -2, "a", k0, func(x *ctx) error { x.w.OK(); return nil })
	reg("debug", -2, "a", k0, func(x *ctx) error { x.w.Err("ERR DEBUG is not supported by engram-redis"); return nil })
}

func cmdPing(x *ctx) error {
	if len(x.args) > 2 {
		x.w.Err("ERR wrong number of arguments for 'ping' command")
		return nil
	}
	if len(x.c.subs)+len(x.c.psubs) > 0 && x.c.proto == 2 {
		x.w.Array(2)
		x.w.BulkS("pong")
		if len(x.args) == 2 {
			x.w.Bulk(x.args[1])
		} else {
			x.w.BulkS("")
		}
		return nil
	}
	if len(x.args) == 2 {
		x.w.Bulk(x.args[1])
	} else {
		x.w.Simple("PONG")
	}
	return nil
}

func cmdHello(x *ctx) error {
	proto := x.c.proto
	i := 1
	if len(x.args) > 1 {
		v, ok := parseInt(x.args[1])
		if !ok {
			x.w.Err("ERR Protocol version is not an integer or out of range")
			return nil
		}
		if v != 2 && v != 3 {
			x.w.Err("NOPROTO unsupported protocol version")
			return nil
		}
		proto = int(v)
		i = 2
	}
	for ; i < len(x.args); i++ {
		switch {
		case eq(x.args[i], "auth") && i+2 < len(x.args):
			if x.s.cfg.RequirePass == "" || string(x.args[i+2]) != x.s.cfg.RequirePass {
				x.w.Err("WRONGPASS invalid username-password pair or user is disabled.")
				return nil
			}
			x.c.authed = true
			i += 2
		case eq(x.args[i], "setname") && i+1 < len(x.args):
			x.c.name = string(x.args[i+1])
			i++
		default:
			x.w.Err("ERR Syntax error in HELLO option '" + string(x.args[i]) + "'")
			return nil
		}
	}
	if !x.c.authed {
		x.w.Err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return nil
	}
	x.c.proto = proto
	x.w.proto = proto
	x.w.Map(7)
	x.w.BulkS("server")
	x.w.BulkS("redis")
	x.w.BulkS("version")
	x.w.BulkS(version)
	x.w.BulkS("proto")
	x.w.Int(int64(proto))
	x.w.BulkS("id")
	x.w.Int(x.c.id)
	x.w.BulkS("mode")
	x.w.BulkS("standalone")
	x.w.BulkS("role")
	x.w.BulkS("master")
	x.w.BulkS("modules")
	x.w.Array(0)
	return nil
}

const version = "7.0.15"

func cmdAuth(x *ctx) error {
	if len(x.args) > 3 {
		x.w.Err(errSyntax)
		return nil
	}
	if x.s.cfg.RequirePass == "" {
		x.w.Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return nil
	}
	pass := x.args[len(x.args)-1]
	if len(x.args) == 3 && string(x.args[1]) != "default" || string(pass) != x.s.cfg.RequirePass {
		x.w.Err("WRONGPASS invalid username-password pair or user is disabled.")
		return nil
	}
	x.c.authed = true
	x.w.OK()
	return nil
}

func cmdSelect(x *ctx) error {
	n, ok := parseInt(x.args[1])
	if !ok {
		x.w.Err(errNotInt)
		return nil
	}
	if n < 0 || n >= numDBs {
		x.w.Err("ERR DB index is out of range")
		return nil
	}
	x.c.db = int(n)
	x.w.OK()
	return nil
}

func cmdTime(x *ctx) error {
	now := time.Now()
	x.w.Array(2)
	x.w.BulkS(strconv.FormatInt(now.Unix(), 10))
	x.w.BulkS(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
	return nil
}

func cmdSave(x *ctx) error {
	x.s.lastSave = time.Now().Unix()
	x.w.OK()
	return nil
}

// flush replaces databases [from, to) with empty tables; the old entries
// become garbage for the pool's collector.
func (x *ctx) flush(from, to int) error {
	if len(x.args) > 2 || (len(x.args) == 2 && !eq(x.args[1], "sync") && !eq(x.args[1], "async")) {
		x.w.Err(errSyntax)
		return nil
	}
	// WATCHed keys that exist in the flushed databases are touched (as in
	// Redis; a watched key that does not exist is not).
	for k := range x.s.watch {
		i := strings.IndexByte(k, 0)
		db, _ := strconv.Atoi(k[:i])
		key := []byte(k[i+1:])
		if db >= from && db < to {
			if _, e := x.s.root.DBs[db].find(key, hashKey(key)); e != nil {
				x.s.touchKey(db, key)
			}
		}
	}
	for db := from; db < to; db++ {
		d, err := newDict(x.tx)
		if err != nil {
			return err
		}
		if err := x.tx.Log(&x.s.root.DBs[db]); err != nil {
			return err
		}
		x.s.root.DBs[db] = d
	}
	x.s.needCollect = true
	x.w.OK()
	return nil
}

func cmdShutdown(x *ctx) error {
	x.s.shutdownReq = true
	x.c.closing = true
	return nil
}

func cmdReset(x *ctx) error {
	x.c.multi, x.c.queue, x.c.multiErr, x.c.watched, x.c.dirty = false, nil, false, nil, false
	x.s.pubsub.drop(x.c)
	x.c.db, x.c.proto, x.c.name = 0, 2, ""
	x.c.authed = x.s.cfg.RequirePass == ""
	x.w.proto = 2
	x.w.Simple("RESET")
	return nil
}

func cmdInfo(x *ctx) error {
	s := x.s
	var b strings.Builder
	fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nengram_redis:1\r\nredis_mode:standalone\r\nprocess_id:%d\r\ntcp_port:%s\r\nuptime_in_seconds:%d\r\n\r\n",
		version, pid(), portOf(s.Addr()), int64(time.Since(s.start).Seconds()))
	fmt.Fprintf(&b, "# Clients\r\nconnected_clients:%d\r\nblocked_clients:%d\r\n\r\n", len(s.clients), len(s.blocked))
	fmt.Fprintf(&b, "# Memory\r\nmaxmemory:%d\r\nengram_pool_max_size:%d\r\n\r\n", s.maxmemory, s.cfg.MaxMemory)
	s.writePersistenceInfo(&b)
	fmt.Fprintf(&b, "# Stats\r\ntotal_commands_processed:%d\r\nkeyspace_hits:%d\r\nkeyspace_misses:%d\r\n\r\n", s.stats.cmds, s.stats.keyspaceHits, s.stats.keyspaceMiss)
	b.WriteString("# Keyspace\r\n")
	for i, d := range s.root.DBs {
		if d.Used > 0 {
			fmt.Fprintf(&b, "db%d:keys=%d,expires=0,avg_ttl=0\r\n", i, d.Used)
		}
	}
	x.w.BulkS(b.String())
	return nil
}

func durabilityName(d engram.Durability) string {
	switch d {
	case engram.Pmem:
		return "pmem"
	case engram.Msync:
		return "msync"
	case engram.Wal:
		return "wal"
	case engram.Process:
		return "process"
	}
	return "auto"
}

func portOf(addr string) string {
	i := strings.LastIndexByte(addr, ':')
	return addr[i+1:]
}

func cmdConfig(x *ctx) error {
	sub := strings.ToLower(string(x.args[1]))
	switch sub {
	case "get":
		if len(x.args) < 3 {
			x.w.Err("ERR wrong number of arguments for 'config|get' command")
			return nil
		}
		vals := x.s.configMap()
		var keys []string
		for _, pat := range x.args[2:] {
			for k := range vals {
				if globMatch([]byte(strings.ToLower(string(pat))), []byte(k), false) {
					keys = append(keys, k)
				}
			}
		}
		sort.Strings(keys)
		x.w.Map(len(keys))
		for _, k := range keys {
			x.w.BulkS(k)
			x.w.BulkS(vals[k])
		}
	case "set":
		if len(x.args) < 4 || len(x.args)%2 != 0 {
			x.w.Err("ERR wrong number of arguments for 'config|set' command")
			return nil
		}
		for i := 2; i < len(x.args); i += 2 { // all names first: nothing applied if one is wrong
			if k := strings.ToLower(string(x.args[i])); !redisConfigNames[k] {
				x.w.Err("ERR Unknown option or number of arguments for CONFIG SET - '" + k + "'")
				return nil
			}
		}
		for i := 2; i < len(x.args); i += 2 {
			k, v := strings.ToLower(string(x.args[i])), string(x.args[i+1])
			switch k {
			case "requirepass":
				x.s.cfg.RequirePass = v
				x.s.hasPass.Store(v != "")
			case "hash-max-listpack-entries", "hash-max-ziplist-entries", "hash-max-listpack-value", "hash-max-ziplist-value",
				"set-max-intset-entries", "zset-max-listpack-entries", "zset-max-ziplist-entries", "zset-max-listpack-value", "zset-max-ziplist-value":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					x.w.Err("ERR CONFIG SET failed (possibly related to argument '" + k + "') - argument couldn't be parsed into an integer")
					return nil
				}
				*x.s.lim.field(k) = n
			case "maxmemory":
				n, ok := parseMemory(v)
				if !ok {
					x.w.Err("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value")
					return nil
				}
				x.s.softMax = n
				x.s.maxmemory = n
			case "save", "appendonly", "appendfsync", "maxmemory-policy", "hz", "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush":
				// Persistence and eviction settings that do not apply here.
			default:
				// Accepted and ignored: Redis's other settings (of its
				// encodings, persistence, memory) that do not apply here.
			}
		}
		x.w.OK()
	case "resetstat", "rewrite":
		x.w.OK()
	default:
		x.w.Err("ERR unknown subcommand '" + string(x.args[1]) + "'. Try CONFIG HELP.")
	}
	return nil
}

func (s *Server) configMap() map[string]string {
	host, port := s.Addr(), portOf(s.Addr())
	host = host[:len(host)-len(port)-1]
	m := map[string]string{
		"port": port, "bind": host, "dir": path.Dir(s.cfg.Pool), "dbfilename": path.Base(s.cfg.Pool),
		"maxmemory": strconv.FormatUint(s.maxmemory, 10), "requirepass": s.cfg.RequirePass,
		"appendonly": "no", "save": "", "databases": "16", "maxmemory-policy": "noeviction",
		"appendfsync": "always", "maxclients": strconv.Itoa(s.maxClients()),
	}
	for _, n := range limitNames {
		m[n] = strconv.FormatInt(*s.lim.field(n), 10)
	}
	return m
}

func cmdClient(x *ctx) error {
	switch strings.ToLower(string(x.args[1])) {
	case "setname":
		if len(x.args) != 3 {
			x.w.Err("ERR wrong number of arguments for 'client|setname' command")
			return nil
		}
		if strings.ContainsAny(string(x.args[2]), " \n") {
			x.w.Err("ERR Client names cannot contain spaces, newlines or special characters.")
			return nil
		}
		x.c.name = string(x.args[2])
		x.w.OK()
	case "getname":
		if x.c.name == "" {
			x.w.Null()
		} else {
			x.w.BulkS(x.c.name)
		}
	case "id":
		x.w.Int(x.c.id)
	case "list", "info":
		var b strings.Builder
		ids := make([]int64, 0, len(x.s.clients))
		for id := range x.s.clients {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			c := x.s.clients[id]
			if strings.EqualFold(string(x.args[1]), "info") && c != x.c {
				continue
			}
			fmt.Fprintf(&b, "id=%d addr=%s name=%s age=%d db=%d cmd=%s resp=%d\n", c.id, c.addr, c.name,
				int64(time.Since(c.created).Seconds()), c.db, c.lastCmd, c.proto)
		}
		x.w.BulkS(b.String())
	case "kill":
		if len(x.args) == 4 && eq(x.args[2], "id") {
			if id, ok := parseInt(x.args[3]); !ok || id <= 0 {
				x.w.Err("ERR client-id should be greater than 0")
				return nil
			}
		}
		n := int64(0)
		for _, c := range x.s.clients {
			if (len(x.args) == 3 && c.addr == string(x.args[2])) ||
				(len(x.args) == 4 && eq(x.args[2], "id") && strconv.FormatInt(c.id, 10) == string(x.args[3])) ||
				(len(x.args) == 4 && eq(x.args[2], "addr") && c.addr == string(x.args[3])) {
				// Closed after the batch's replies (afterCommit): what it
				// ran is committed and answered, nothing more runs.
				if !c.closing {
					c.closing = true
					x.s.killed = append(x.s.killed, c)
				}
				n++
			}
		}
		if len(x.args) == 3 {
			if n == 0 {
				x.w.Err("ERR No such client")
			} else {
				x.w.OK()
			}
		} else {
			x.w.Int(n)
		}
	case "unblock":
		clientUnblock(x)
	case "setinfo", "no-evict", "no-touch", "reply":
		x.w.OK()
	default:
		x.w.Err("ERR unknown subcommand '" + string(x.args[1]) + "'. Try CLIENT HELP.")
	}
	return nil
}

func cmdCommand(x *ctx) error {
	if len(x.args) == 1 {
		return commandInfo(x, sortedNames())
	}
	switch strings.ToLower(string(x.args[1])) {
	case "count":
		x.w.Int(int64(len(commands)))
	case "info":
		var names []string
		for _, a := range x.args[2:] {
			names = append(names, strings.ToLower(string(a)))
		}
		return commandInfo(x, names)
	case "docs":
		var names []string
		for _, a := range x.args[2:] {
			names = append(names, strings.ToLower(string(a)))
		}
		return commandDocs(x, names)
	case "getkeys":
		x.w.Array(0)
	default:
		x.w.Err("ERR unknown subcommand '" + string(x.args[1]) + "'. Try COMMAND HELP.")
	}
	return nil
}

func sortedNames() []string {
	var n []string
	for k := range commands {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func cmdMulti(x *ctx) error {
	if x.c.multi {
		x.w.Err("ERR MULTI calls can not be nested")
		return nil
	}
	x.c.multi, x.c.queue, x.c.multiErr = true, nil, false
	x.w.OK()
	return nil
}

func cmdDiscard(x *ctx) error {
	if !x.c.multi {
		x.w.Err("ERR DISCARD without MULTI")
		return nil
	}
	x.c.multi, x.c.queue, x.c.multiErr, x.c.watched = false, nil, false, nil
	x.w.OK()
	return nil
}

// cmdExec runs the queue inside the current transaction (one region).
func cmdExec(x *ctx) error {
	c := x.c
	if !c.multi {
		x.w.Err("ERR EXEC without MULTI")
		return nil
	}
	queue, bad := c.queue, c.multiErr
	c.multi, c.queue, c.multiErr = false, nil, false
	watched := c.watched
	c.watched = nil
	if bad {
		x.w.Err("EXECABORT Transaction discarded because of previous errors.")
		return nil
	}
	if x.s.queueOOM(queue) {
		x.w.Err("EXECABORT Transaction discarded because of: " + errOOM)
		return nil
	}
	for k, v := range watched {
		if x.s.watch[k] != v || x.s.expiredWatched(x.tx, k) {
			x.w.NullArray()
			return nil
		}
	}
	x.w.Array(len(queue))
	c.inExec = true
	defer func() { c.inExec = false }()
	for _, args := range queue {
		if err := x.s.dispatch(x.tx, c, args, x.w); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) expiredWatched(tx *engram.Tx, k string) bool {
	i := strings.IndexByte(k, 0)
	db, _ := strconv.Atoi(k[:i])
	key := []byte(k[i+1:])
	_, e := s.root.DBs[db].find(key, hashKey(key))
	return e != nil && e.Expire != 0 && e.Expire <= nowMs()
}

func cmdWatch(x *ctx) error {
	if x.c.multi {
		x.w.Err("ERR WATCH inside MULTI is not allowed")
		return nil
	}
	if x.c.watched == nil {
		x.c.watched = map[string]int64{}
	}
	for _, k := range x.args[1:] {
		key := wkey(x.c.db, k)
		if _, ok := x.s.watch[key]; !ok {
			x.s.watch[key] = 0
		}
		x.c.watched[key] = x.s.watch[key]
	}
	x.w.OK()
	return nil
}

// activeExpire samples keys with a TTL and deletes expired ones in one
// transaction per tick.
func (s *Server) activeExpire() {
	// (Collect waits for a background recovery GC: not on the executor.)
	if g := gcGen.Load(); (s.needCollect || g != s.gcSeen) && !s.recoveryGCPending() {
		s.needCollect, s.gcSeen = false, g
		_ = s.pool.Collect()
	}
	_ = s.pool.Txn(func(tx *engram.Tx) error {
		now := nowMs()
		for db, d := range s.root.DBs {
			if d.Used == 0 {
				continue
			}
			var dead [][]byte
			for i := 0; i < 20 && len(dead) < 20; i++ {
				s.expireCursor[db] = d.scanBucket(s.expireCursor[db], func(e *pEntry) {
					if e.Expire != 0 && e.Expire <= now {
						dead = append(dead, append([]byte(nil), e.key()...))
					}
				})
				if s.expireCursor[db] == 0 {
					break
				}
			}
			for _, k := range dead {
				s.touchKey(db, k)
				if _, err := d.remove(tx, k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// cmdMemory answers MEMORY USAGE with the key's pool bytes (key, value and
// entry); other subcommands answer like an idle Redis.
func cmdMemory(x *ctx) error {
	if !eq(x.args[1], "usage") || len(x.args) < 3 {
		x.w.Err("ERR unknown subcommand '" + string(x.args[1]) + "'. Try MEMORY HELP.")
		return nil
	}
	e, err := x.lookup(x.args[2])
	if err != nil {
		return err
	}
	if e == nil {
		x.w.Null()
	} else {
		x.w.Int(int64(len(e.key()) + cap(e.val()) + 48))
	}
	return nil
}
