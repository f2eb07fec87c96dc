// zhint_test.go: ZADD moves that take the warm-up's paths (zhint.go)
// leave the set a model holds, through pipelines whose earlier commands
// move, add and remove the nodes those paths name; the set is left not
// ranked by them and its ranks computed again are exact; and a hinted
// move that trusted its new place unchecked (plantHintUnchecked) is
// caught.
package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	engram "github.com/engram-pm/engram-go"
)

// zhintState is s's set "z" as zpipeState reads it (order, table,
// length: no rank read), under the executor's mutex, and whether a move
// took its hint since the spans were last computed (the set's stamp is
// the epoch + 1: only moveHinted writes that).
func zhintState(t *testing.T, s *Server) (map[string]string, bool) {
	t.Helper()
	s.execMu.Lock()
	defer s.execMu.Unlock()
	st, err := zpipeState(s.root)
	if err != nil {
		t.Fatal(err)
	}
	_, e := s.root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
	var hinted bool
	_ = s.pool.Txn(func(tx *engram.Tx) error {
		hinted = e.Coll.ZHead.Hash == tx.Epoch()+1
		return nil
	})
	return st, hinted
}

func TestZAddHintedMoves(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, tmpDir(t)+"/zh.pool", 0)
	model := map[string]float64{}
	key := func(i int) string { return "m" + strconv.Itoa(i) }
	for i := 0; i < 300; i++ { // a skiplist, ten members a score: many ties
		if err := c.Do(ctx, "ZADD", "z", i%30, key(i)).Err(); err != nil {
			t.Fatal(err)
		}
		model[key(i)] = float64(i % 30)
	}
	r := rand.New(rand.NewPCG(11, 12))
	hintedRounds := 0
	for round := 0; round < 300; round++ {
		p := c.Pipeline()
		for k := 0; k < 16; k++ {
			m := key(r.IntN(330)) // a tenth new
			switch op := r.IntN(20); {
			case op == 0:
				p.ZRem(ctx, "z", m)
				delete(model, m)
			case op == 1:
				p.ZIncrBy(ctx, "z", 1, m)
				model[m]++
			default:
				sc := float64(r.IntN(31))
				if r.IntN(4) == 0 {
					sc += 0.5
				}
				p.Do(ctx, "ZADD", "z", sc, m)
				model[m] = sc
			}
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		st, hinted := zhintState(t, s)
		if hinted {
			hintedRounds++
		}
		if len(st) != len(model) {
			t.Fatalf("round %d: %d members, model %d", round, len(st), len(model))
		}
		for m, sc := range model {
			if st[m] != fmt.Sprint(sc) {
				t.Fatalf("round %d: %s is %q, model %v", round, m, st[m], sc)
			}
		}
		if round%50 == 49 { // a rank read: the spans computed again, exact
			checkSkiplist(t, s, "z")
			want := modelOrder(model)
			for k := 0; k < 20; k++ {
				j := r.IntN(len(want))
				if rk := c.ZRank(ctx, "z", want[j].m).Val(); rk != int64(j) {
					t.Fatalf("round %d: ZRANK %s %d, want %d", round, want[j].m, rk, j)
				}
			}
		}
	}
	// The first Len moves after a rank read keep the spans (keepsRanks);
	// the pipelines before the first and after them take hints.
	if hintedRounds < 100 {
		t.Fatalf("only %d of 300 pipelines took a hint", hintedRounds)
	}
	t.Logf("%d of 300 pipelines took a hint", hintedRounds)
}

// TestZAddHintPlanted: a hinted move that trusts its new place's
// predecessors unchecked (plantHintUnchecked) breaks the order when an
// earlier command of its pipeline put a node between them and the new
// place (a member moved to 5.6, then another to 5.7: the warm-up found
// m5 before 5.7); checked, the same pipeline leaves the order whole.
func TestZAddHintPlanted(t *testing.T) {
	for _, plant := range []bool{false, true} {
		t.Run(fmt.Sprint(plant), func(t *testing.T) {
			ctx := context.Background()
			s, c := start(t, tmpDir(t)+"/zhp.pool", 0)
			if err := c.Do(ctx, "CONFIG", "SET", "zset-max-listpack-entries", "4").Err(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 40; i++ { // a new set keeps no spans (keepsRanks): its moves take hints
				if err := c.Do(ctx, "ZADD", "z", float64(i)+0.25, "m"+strconv.Itoa(i)).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// Two members of level 1 (hinted whatever the list's level).
			var low []string
			s.execMu.Lock()
			_, e := s.root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
			tall := map[*pZNode]bool{}
			for n := e.Coll.ZHead.lv(1).Fwd; n != nil; n = n.lv(1).Fwd {
				tall[n] = true
			}
			for n := e.Coll.ZHead.lv(0).Fwd; n != nil; n = n.lv(0).Fwd {
				if !tall[n] && n.Score > 7 {
					low = append(low, string(n.member()))
				}
			}
			// The server reads the switch under execMu (runBatch): set and
			// reset it there, or the race detector sees two goroutines.
			plantHintUnchecked = plant
			s.execMu.Unlock()
			defer func() {
				s.execMu.Lock()
				plantHintUnchecked = false
				s.execMu.Unlock()
			}()
			p := c.Pipeline()
			p.Do(ctx, "ZADD", "z", 5.6, low[0])
			p.Do(ctx, "ZADD", "z", 5.7, low[len(low)-1]) // not next to low[0]: its predecessor stays
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			s.execMu.Lock()
			_, err := zpipeState(s.root)
			s.execMu.Unlock()
			if plant && (err == nil || !strings.HasPrefix(err.Error(), "order")) {
				t.Fatal("the unchecked hint was not caught")
			}
			if !plant && err != nil {
				t.Fatal(err)
			}
			t.Logf("plant %v: %v", plant, err)
		})
	}
}

// TestZAddLoneBatch50Warmed: a batch of 50 clients' lone ZADDs (the batch
// redis-benchmark -c 50 -P 1 gives the server most often) is warmed and
// hinted whole: warmLone leaves a hint (and so logged the move ahead:
// zwarm adds both for the same moves) for every one whose node is below
// zpathLevels levels. With 32 lookups at most (zwarmMax 64) the last 18
// had none.
func TestZAddLoneBatch50Warmed(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, tmpDir(t)+"/z50.pool", 0)
	if err := c.Do(ctx, "CONFIG", "SET", "zset-max-listpack-entries", "4").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		if err := c.Do(ctx, "ZADD", "z", i, fmt.Sprintf("m%d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	_, e := s.root.DBs[0].find([]byte("z"), hashKey([]byte("z")))
	z := e.Coll
	level := map[*pZNode]int{} // each node's level, from the links
	for i := 0; i < int(z.ZLevel); i++ {
		for n := z.ZHead.lv(i).Fwd; n != nil; n = n.lv(i).Fwd {
			level[n] = i + 1
		}
	}
	var reqs []*request
	want := 0
	for i := 0; i < 50; i++ {
		m := fmt.Sprintf("m%d", i)
		cmd := [][]byte{[]byte("ZADD"), []byte("z"), []byte(fmt.Sprintf("%d.25", i)), []byte(m)}
		reqs = append(reqs, &request{c: &client{id: int64(100 + i), proto: 2, authed: true}, cmds: [][][]byte{cmd}})
		if level[z.zfind([]byte(m))] < zpathLevels {
			want++
		}
	}
	errDone := fmt.Errorf("done")
	err := s.pool.Txn(func(tx *engram.Tx) error {
		if err := s.warmLone(tx, reqs); err != nil {
			return err
		}
		return errDone // nothing to keep: roll back
	})
	got := s.zhints.n
	s.zhints.reset()
	if err != errDone {
		t.Fatal(err)
	}
	if got != want || want <= 32 {
		t.Fatalf("%d hints for the batch's 50 moves, want %d (its nodes below %d levels)", got, want, zpathLevels)
	}
}
