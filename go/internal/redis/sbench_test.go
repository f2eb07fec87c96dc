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
	s, _ := startBench(b)
	cls := make([]*client, 50)
	for i := range cls {
		cls[i] = &client{id: int64(i + 1), proto: 2, authed: true}
	}
	// nRegions regions' commands made up front (about 100,000 keys: the
	// table's working set is redis-benchmark's), so that the timed loop
	// allocates only what the server does.
	r := rand.New(rand.NewPCG(1, 2))
	regions := make([][]request, nRegions)
	for g := range regions {
		regions[g] = make([]request, 50)
		for k := range regions[g] {
			cmds := make([][][]byte, 16)
			for j := range cmds {
				cmds[j] = mk(r)
			}
			regions[g][k] = request{c: cls[k], cmds: cmds}
		}
	}
	run := func(n int) {
		for i := 0; i < n; i += 800 {
			reqs := regions[(i/800)%len(regions)]
			err := s.pool.Txn(func(tx *engram.Tx) error {
				for k := range reqs {
					if err := s.runRequest(tx, &reqs[k]); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	run(100000) // the keys exist: redis-benchmark's steady state
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	run(b.N)
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
}

func benchKey(r *rand.Rand) []byte { return []byte(fmt.Sprintf("key:%012d", r.IntN(100000))) }

// BenchmarkIncrP16: INCR of a random key of 100,000.
func BenchmarkIncrP16(b *testing.B) {
	incr := []byte("INCR")
	benchPipelines(b, 128, func(r *rand.Rand) [][]byte { return [][]byte{incr, benchKey(r)} })
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
	run(b.N)
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
