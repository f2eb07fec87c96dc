// sbench_test.go: micro-benchmarks of the string, list and hash write
// paths as the executor runs them at pipeline 16 (redis-benchmark -c 50
// -P 16 -r 100000: 50 clients' pipelines of 16 commands in one region),
// without the network: lookup warming, logging ahead, dispatch, the
// replies' encoding and the commit. Each reports the process's CPU time
// per command (cpu-ns/op) and Go heap allocations per command (allocs/op).
package redis

import (
	"fmt"
	"math/rand/v2"
	"testing"

	engram "github.com/engram-pm/engram-go"
)

// benchPipelines runs b.N commands made by mk, 16 per client pipeline
// and 50 pipelines per region (runBatch's work but the socket write).
func benchPipelines(b *testing.B, nRegions int, mk func(r *rand.Rand) [][]byte) {
	benchBatches(b, nRegions, 16, 50, mk)
}

// benchBatches runs b.N commands made by mk, depth per client request
// and one request of each of clients per region, as runBatch runs a
// batch (runRequests) but the socket write. The first 100,000 commands
// fill the keyspace untimed; the timed ones follow them in the regions
// made up front (wrapping around after nRegions).
func benchBatches(b *testing.B, nRegions, depth, clients int, mk func(r *rand.Rand) [][]byte) {
	benchBatchesFill(b, 100000, nRegions, depth, clients, mk)
}

// benchBatchesFill is benchBatches with fill untimed commands first.
func benchBatchesFill(b *testing.B, fill, nRegions, depth, clients int, mk func(r *rand.Rand) [][]byte) {
	s, _ := startBench(b)
	cls := make([]*client, clients)
	for i := range cls {
		cls[i] = &client{id: int64(i + 1), proto: 2, authed: true}
	}
	// nRegions regions' commands made up front (about 100,000 keys: the
	// table's working set is redis-benchmark's), so that the timed loop
	// allocates only what the server does.
	r := rand.New(rand.NewPCG(1, 2))
	regions := make([][]*request, nRegions)
	for g := range regions {
		regions[g] = make([]*request, clients)
		for k := range regions[g] {
			cmds := make([][][]byte, depth)
			for j := range cmds {
				cmds[j] = mk(r)
			}
			regions[g][k] = &request{c: cls[k], cmds: cmds}
		}
	}
	per, next := depth*clients, 0
	run := func(n int) {
		for i := 0; i < n; i += per {
			reqs := regions[next%len(regions)]
			next++
			if err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequests(tx, reqs) }); err != nil {
				b.Fatal(err)
			}
		}
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	run(fill) // the keys exist: redis-benchmark's steady state
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	benchTimed(run, b.N)
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
}

// benchTimed runs the timed part of a benchmark: a function of its own,
// so that callgrind can count it alone (--toggle-collect='*benchTimed'),
// without the fill, whose cost varies between runs with the skiplist's
// random levels by more than a change being measured.
//
//go:noinline
func benchTimed(run func(int), n int) { run(n) }

func benchKey(r *rand.Rand) []byte { return []byte(fmt.Sprintf("key:%012d", r.IntN(100000))) }

// BenchmarkIncrP16: INCR of a random key of 100,000.
func BenchmarkIncrP16(b *testing.B) {
	incr := []byte("INCR")
	benchPipelines(b, 128, func(r *rand.Rand) [][]byte { return [][]byte{incr, benchKey(r)} })
}

// BenchmarkIncrP1: INCR at pipeline 1, 25 clients' one-command requests
// per region (a batch's size under redis-benchmark -c 50 -P 1).
func BenchmarkIncrP1(b *testing.B) {
	incr := []byte("INCR")
	benchBatches(b, 8000, 1, 25, func(r *rand.Rand) [][]byte { return [][]byte{incr, benchKey(r)} })
}

// BenchmarkSetP1: SET of redis-benchmark's value at pipeline 1 (as
// BenchmarkIncrP1), the write that stores nothing once the keys exist.
func BenchmarkSetP1(b *testing.B) {
	set, v := []byte("SET"), []byte("xxx")
	benchBatches(b, 8000, 1, 25, func(r *rand.Rand) [][]byte { return [][]byte{set, benchKey(r), v} })
}

// BenchmarkSetP16: SET of a random key of 100,000 to a 3-byte value.
func BenchmarkSetP16(b *testing.B) {
	set, v := []byte("SET"), []byte("xxx")
	benchPipelines(b, 128, func(r *rand.Rand) [][]byte { return [][]byte{set, benchKey(r), v} })
}

// BenchmarkMSetP16: MSET of 10 random keys of 100,000 (redis-benchmark's).
func BenchmarkMSetP16(b *testing.B) {
	mset, v := []byte("MSET"), []byte("xxx")
	benchPipelines(b, 13, func(r *rand.Rand) [][]byte {
		args := [][]byte{mset}
		for i := 0; i < 10; i++ {
			args = append(args, benchKey(r), v)
		}
		return args
	})
}

// benchVal is a random 3-byte value of 1000 ("000".."999"): a SET or
// MSET with it mostly changes the key's value (redis-benchmark's "xxx"
// over "xxx" writes nothing: store.go's storesNothing).
func benchVal(r *rand.Rand) []byte { return []byte(fmt.Sprintf("%03d", r.IntN(1000))) }

// BenchmarkSetNewValueP16: SetP16 with values that change (benchVal).
func BenchmarkSetNewValueP16(b *testing.B) {
	set := []byte("SET")
	benchPipelines(b, 128, func(r *rand.Rand) [][]byte { return [][]byte{set, benchKey(r), benchVal(r)} })
}

// BenchmarkMSetNewValueP16: MSetP16 with values that change (benchVal).
func BenchmarkMSetNewValueP16(b *testing.B) {
	mset := []byte("MSET")
	benchPipelines(b, 13, func(r *rand.Rand) [][]byte {
		args := [][]byte{mset}
		for i := 0; i < 10; i++ {
			args = append(args, benchKey(r), benchVal(r))
		}
		return args
	})
}

// BenchmarkLPushP16: LPUSH of a 3-byte value to one list
// (redis-benchmark's "LPUSH mylist xxx").
func BenchmarkLPushP16(b *testing.B) {
	lpush, k, v := []byte("LPUSH"), []byte("mylist"), []byte("xxx")
	benchPipelines(b, 1, func(r *rand.Rand) [][]byte { return [][]byte{lpush, k, v} })
}

// BenchmarkLPushRegion1: LPUSH of a 3-byte value to one list, one command
// per region (pipeline 1 with one client: every push is its region's
// first, so it logs its bytes, chunk and length with an engine call).
func BenchmarkLPushRegion1(b *testing.B) {
	s, _ := startBench(b)
	cl := &client{id: 1, proto: 2, authed: true}
	cmds := [][][]byte{{[]byte("LPUSH"), []byte("mylist"), []byte("xxx")}}
	run := func(n int) {
		for i := 0; i < n; i++ {
			r := request{c: cl, cmds: cmds}
			if err := s.pool.Txn(func(tx *engram.Tx) error { return s.runRequest(tx, &r) }); err != nil {
				b.Fatal(err)
			}
		}
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	run(10000)
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	benchTimed(run, b.N)
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkHSetP16: HSET of a random field of 100,000 of one hash to a
// 3-byte value (redis-benchmark's "HSET myhash element:<rand> xxx").
func BenchmarkHSetP16(b *testing.B) {
	hset, k, v := []byte("HSET"), []byte("myhash"), []byte("xxx")
	benchPipelines(b, 128, func(r *rand.Rand) [][]byte {
		return [][]byte{hset, k, []byte(fmt.Sprintf("element:%012d", r.IntN(100000))), v}
	})
}

// BenchmarkHSetP1: BenchmarkHSetP16's commands at pipeline 1, 25
// clients' one-command requests per region.
func BenchmarkHSetP1(b *testing.B) {
	hset, k, v := []byte("HSET"), []byte("myhash"), []byte("xxx")
	benchBatches(b, 8000, 1, 25, func(r *rand.Rand) [][]byte {
		return [][]byte{hset, k, []byte(fmt.Sprintf("element:%012d", r.IntN(100000))), v}
	})
}

// zaddCmd is redis-benchmark's ZADD: a random score of 100,000 to a
// random member of 100,000 of one sorted set ("ZADD myzset <rand>
// element:<rand>"; nearly every one moves a member once the set is full).
func zaddCmd(r *rand.Rand) [][]byte {
	return [][]byte{[]byte("ZADD"), []byte("myzset"), []byte(fmt.Sprint(r.IntN(100000))),
		[]byte(fmt.Sprintf("element:%012d", r.IntN(100000)))}
}

// BenchmarkZAddP16: ZADD at pipeline 16 (50 clients' pipelines of 16 per
// region). 250 regions: the fill's 100,000 commands, then 100,000 others.
func BenchmarkZAddP16(b *testing.B) { benchBatches(b, 250, 16, 50, zaddCmd) }

// BenchmarkZAddP1: ZADD at pipeline 1, 25 clients' one-command requests
// per region (a batch's size under redis-benchmark -c 50 -P 1: INFO's
// engram_group_commit_avg_commands was 23-36). 8,000 regions: the fill,
// then 100,000 others.
func BenchmarkZAddP1(b *testing.B) { benchBatches(b, 8000, 1, 25, zaddCmd) }

// BenchmarkZAddP1Full is ZADD at pipeline 1 on a full set: 300,000
// ZADDs first (about 95,000 members, the member table grown and its
// rehash done), then nearly every ZADD a move, as after bench.py's fill;
// 50 clients' one-command requests per region: under redis-benchmark -c
// 50 -P 1 the server (the bottleneck) ran 78 % of its ZADDs in batches of
// all 50 clients (a uprobe on runRequests' batch length, 60,000 requests
// after a P16 fill; most other batches held 1-4). 8,000 regions: the
// fill, then 100,000 others.
func BenchmarkZAddP1Full(b *testing.B) { benchBatchesFill(b, 300000, 8000, 1, 50, zaddCmd) }
