// zbench_test.go: micro-benchmarks of the big sorted set's and hash's
// write paths (pzset.go, phash.go) without the network: redis-benchmark's
// ZADD and HSET (-r 100000: one key, random members, after warm-up mostly
// moves of existing members and overwrites of existing fields), run in
// regions of 800 commands as the executor runs a P16 batch of 50 clients.
// Each reports the process's CPU time per command (cpu-ns/op), the figure
// that holds on a shared machine.
package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"
	"unsafe"

	engram "github.com/engram-pm/engram-go"
	goredis "github.com/redis/go-redis/v9"
)

// startBench starts a server on a pool under /dev/shm (pmem mode) and a
// client of it.
func startBench(b *testing.B) (*Server, *goredis.Client) {
	s := newBenchServer(b)
	if err := s.Listen(); err != nil {
		b.Fatal(err)
	}
	go s.Serve()
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1})
	b.Cleanup(func() { c.Close() })
	return s, c
}

// newBenchServer opens a server on a new pool under /dev/shm (pmem mode,
// checked mode off) that does not serve yet (no executor: no expiry tick).
func newBenchServer(b *testing.B) *Server {
	d, err := os.MkdirTemp("/dev/shm", "engram-redis-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	s, err := New(Config{Addr: "127.0.0.1:0", Pool: d + "/b.pool", Durability: engram.Pmem})
	if err != nil {
		b.Fatal(err)
	}
	uncheck(s.pool)
	b.Cleanup(func() { s.Close() })
	return s
}

// uncheck turns the pool's checked mode off (go test turns it on: a
// reflect walk of every logged value at commit, which would dominate the
// figures; the server runs without it).
func uncheck(p *engram.Pool) {
	f := reflect.ValueOf(p).Elem().FieldByName("checked")
	*(*bool)(unsafe.Pointer(f.UnsafeAddr())) = false
}

func zm(m string) goredis.Z { return goredis.Z{Member: m} }

// cpuNow is the process's user + system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchColl fills key k with n members (scores, fields) through the
// server and returns its collection.
func benchColl(b *testing.B, s *Server, k string, n int, add func(tx *engram.Tx, c *pColl, i int) error, first func(p context.Context) error) *pColl {
	if err := first(context.Background()); err != nil {
		b.Fatal(err)
	}
	_, e := s.root.DBs[0].find([]byte(k), hashKey([]byte(k)))
	if e == nil || e.Coll == nil {
		b.Fatalf("%s is not a table or skiplist", k)
	}
	for i := 0; i < n; i += 1000 {
		err := s.pool.Txn(func(tx *engram.Tx) error {
			for j := i; j < min(i+1000, n); j++ {
				if err := add(tx, e.Coll, j); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return e.Coll
}

// runRegions runs b.N calls of op in regions of 800, under the executor's
// mutex, and reports the CPU time per call.
func runRegions(b *testing.B, s *Server, op func(tx *engram.Tx, r *rand.Rand) error) {
	s.execMu.Lock()
	defer s.execMu.Unlock()
	r := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	c0 := cpuNow()
	for i := 0; i < b.N; i += 800 {
		err := s.pool.Txn(func(tx *engram.Tx) error {
			for j := i; j < min(i+800, b.N); j++ {
				if err := op(tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
}

func member(i int) []byte { return []byte(fmt.Sprintf("element:%012d", i)) }

// members is member(0) .. member(n-1).
func members(n int) [][]byte {
	ms := make([][]byte, n)
	for i := range ms {
		ms[i] = member(i)
	}
	return ms
}

// bigZSet starts a server whose key "z" is a skiplist of 100,000 members
// (member(i), random scores) and returns them.
func bigZSet(b *testing.B) (*Server, *pColl, [][]byte) {
	s, c := startBench(b)
	z := benchColl(b, s, "z", 100000, func(tx *engram.Tx, z *pColl, i int) error {
		_, err := z.zadd(tx, member(i), float64(rand.IntN(100000)))
		return err
	}, func(p context.Context) error {
		for i := 0; i < 200; i++ {
			if err := c.ZAdd(p, "z", zm(fmt.Sprintf("filler%d", i))).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return s, z, members(100000)
}

// BenchmarkZAddMove: ZADD of an existing member with a new random score
// on a 100,000-member skiplist.
func BenchmarkZAddMove(b *testing.B) {
	s, z, ms := bigZSet(b)
	runRegions(b, s, func(tx *engram.Tx, r *rand.Rand) error {
		_, err := z.zadd(tx, ms[r.IntN(len(ms))], float64(r.IntN(100000)))
		return err
	})
}

// BenchmarkZAddNew: ZADD of a new member with a random score on a
// skiplist of 100,000 members and more (each op adds one: a node, its
// member's bytes, its skiplist and table links).
func BenchmarkZAddNew(b *testing.B) {
	s, z, _ := bigZSet(b)
	i := 0
	runRegions(b, s, func(tx *engram.Tx, r *rand.Rand) error {
		i++
		_, err := z.zadd(tx, member(100000+i), float64(r.IntN(100000)))
		return err
	})
}

// BenchmarkHSetSame: HSET of an existing field to its own value ("xxx",
// redis-benchmark's) on a 100,000-field table.
func BenchmarkHSetSame(b *testing.B) {
	s, c := startBench(b)
	v := []byte("xxx")
	h := benchColl(b, s, "h", 100000, func(tx *engram.Tx, h *pColl, i int) error {
		_, err := h.hset(tx, member(i), v)
		return err
	}, func(p context.Context) error {
		for i := 0; i < 600; i++ {
			if err := c.HSet(p, "h", fmt.Sprintf("filler%d", i), "xxx").Err(); err != nil {
				return err
			}
		}
		return nil
	})
	ms := members(100000)
	runRegions(b, s, func(tx *engram.Tx, r *rand.Rand) error {
		_, err := h.hset(tx, ms[r.IntN(len(ms))], v)
		return err
	})
}

// zmove is one ZADD of a pipelined move benchmark: member m to score s.
type zmove struct {
	m []byte
	s float64
}

// runZMovePipelines runs BenchmarkZAddMove's moves 16 at a time, as a
// client's pipeline: before each 16, prepare sees them (what the server
// does for a pipeline before its commands run); then each is one ZADD
// (zadd, or move when not nil).
func runZMovePipelines(b *testing.B, prepare func(tx *engram.Tx, z *pColl, batch []zmove) error, move func(tx *engram.Tx, z *pColl, o zmove) error) {
	s, z, ms := bigZSet(b)
	var batch, ops []zmove
	runRegions(b, s, func(tx *engram.Tx, r *rand.Rand) error {
		if len(ops) == 0 {
			batch = batch[:0]
			for i := 0; i < 16; i++ {
				batch = append(batch, zmove{ms[r.IntN(len(ms))], float64(r.IntN(100000))})
			}
			if err := prepare(tx, z, batch); err != nil {
				return err
			}
			ops = batch
		}
		o := ops[0]
		ops = ops[1:]
		if move != nil {
			return move(tx, z, o)
		}
		_, err := z.zadd(tx, o.m, o.s)
		return err
	})
}

// BenchmarkZAddMoveWarm: BenchmarkZAddMove with the pipeline's walks
// warmed first (zwarm.go), 16 commands at a time as a client's pipeline.
func BenchmarkZAddMoveWarm(b *testing.B) {
	var sink float64
	runZMovePipelines(b, func(_ *engram.Tx, z *pColl, batch []zmove) error {
		var buf [zwarmMax]zwalk
		ws := buf[:0]
		for _, o := range batch {
			l := zlookup{c: z, m: o.m, z: o.s, zset: true}
			l.n = z.zfind(o.m)
			l.found = l.n != nil
			ws = addZWalks(ws, &l)
		}
		sink += walkZ(ws)
		return nil
	}, nil)
	if sink == 1 {
		b.Log(sink)
	}
}

// BenchmarkZAddMovePrelog: BenchmarkZAddMoveWarm with each 16 moves
// also logged ahead as the server does (prelog.go, zprelog: one LogRanges
// call), so the moves whose guess holds make no log call of their own.
func BenchmarkZAddMovePrelog(b *testing.B) { benchZPrelog(b, nil) }

// BenchmarkZAddMoveHinted: BenchmarkZAddMovePrelog as the server runs it
// on a set that no longer keeps its spans (keepsRanks: moved Len times
// since they were computed): each move takes the paths its pipeline's
// warm-up walked (zhint.go) where they still hold, instead of walking.
func BenchmarkZAddMoveHinted(b *testing.B) { benchZPrelog(b, &zhints{}) }

// benchZPrelog runs runZMovePipelines with each 16 moves warmed and
// logged ahead (zprelog) and, with hs, their paths kept there and taken
// by the moves on a set that no longer keeps its spans.
func benchZPrelog(b *testing.B, hs *zhints) {
	var refs []warmRef
	var pairs []uint64
	var zbuf zwarmBuf
	var sink uint64
	var move func(tx *engram.Tx, z *pColl, o zmove) error
	if hs != nil {
		move = func(tx *engram.Tx, z *pColl, o zmove) error {
			x := z.zfind(o.m)
			_, err := z.zaddAt(tx, x, o.m, o.s, hs.take(z, x, o.s))
			return err
		}
	}
	runZMovePipelines(b, func(tx *engram.Tx, z *pColl, batch []zmove) error {
		if hs != nil {
			z.ZHead.Spare = uint64(z.Len) //engramvet:ignore keepsRanks' count, not logged
			hs.reset()
		}
		refs = refs[:0]
		for _, o := range batch {
			refs = append(refs, warmRef{found: true, e: &pEntry{Coll: z}, f: o.m, z: o.s, zset: true})
		}
		var n uint64
		pairs, n = zprelog(pairs[:0], refs, hs, &zbuf)
		sink += n
		return tx.LogRanges(pairs)
	}, move)
	if sink == 1 {
		b.Log(sink)
	}
}

// BenchmarkZRerank: computing every span of a 100,000-member skiplist
// again (pzset.go, rerank), what the first rank read of a set after a
// restart or a rollback pays once.
func BenchmarkZRerank(b *testing.B) {
	s, z, _ := bigZSet(b)
	s.execMu.Lock()
	defer s.execMu.Unlock()
	b.ResetTimer()
	c0 := cpuNow()
	for i := 0; i < b.N; i++ {
		err := s.pool.Txn(func(tx *engram.Tx) error {
			z.rerank(tx)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
}
