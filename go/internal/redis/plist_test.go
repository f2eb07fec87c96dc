// plist_test.go: LREM and LINSERT in place on the quicklist (plist2.go):
// random operations on a big list against a Go model, the chunk
// invariants after each, the list after a reopen, and kill -9 during a
// stream of them (the list after each restart is the acknowledged one or
// that with the operation in flight applied, never partly changed).
package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// listOp is one LREM (count, value) or LINSERT (before, pivot, value).
type listOp struct {
	rem    bool
	count  int64
	before bool
	pivot  string
	val    string
}

func randListOp(r *rand.Rand) listOp {
	v := strconv.Itoa(r.IntN(8))
	if r.IntN(2) == 0 {
		return listOp{rem: true, count: int64(r.IntN(9) - 4), val: v}
	}
	return listOp{before: r.IntN(2) == 0, pivot: v, val: "n" + strconv.Itoa(r.IntN(1000))}
}

// apply runs the operation on the model and returns Redis's reply.
func (op listOp) apply(l []string) ([]string, int64) {
	if !op.rem {
		i := slices.Index(l, op.pivot)
		if i < 0 {
			return l, -1
		}
		if !op.before {
			i++
		}
		l = slices.Insert(l, i, op.val)
		return l, int64(len(l))
	}
	limit, removed := op.count, int64(0)
	if limit < 0 {
		limit = -limit
	}
	idx := make([]int, 0)
	for j := range l {
		i := j
		if op.count < 0 {
			i = len(l) - 1 - j
		}
		if l[i] == op.val && (limit == 0 || removed < limit) {
			idx = append(idx, i)
			removed++
		}
	}
	slices.Sort(idx)
	for k := len(idx) - 1; k >= 0; k-- {
		l = slices.Delete(l, idx[k], idx[k]+1)
	}
	return l, removed
}

func (op listOp) send(ctx context.Context, c *goredis.Client) (int64, error) {
	if op.rem {
		return c.LRem(ctx, "L", op.count, op.val).Result()
	}
	if op.before {
		return c.LInsertBefore(ctx, "L", op.pivot, op.val).Result()
	}
	return c.LInsertAfter(ctx, "L", op.pivot, op.val).Result()
}

func seedList(t *testing.T, c *goredis.Client, n int) []string {
	l := make([]string, n)
	args := make([]any, n)
	for i := range l {
		l[i] = strconv.Itoa(i % 8)
		args[i] = l[i]
	}
	if err := c.RPush(context.Background(), "L", args...).Err(); err != nil {
		t.Fatal(err)
	}
	return l
}

// checkEntries checks that Data[Start:End] of chunk n is Count whole
// entries, walked from either end.
func checkEntries(n *pLNode) error {
	k, o := int64(0), n.Start
	for ; o < n.End; k++ {
		_, o = entryAt(n.Data, o)
	}
	if o != n.End || k != n.Count {
		return fmt.Errorf("chunk [%d,%d) count %d: %d entries forward, ending at %d", n.Start, n.End, n.Count, k, o)
	}
	k, o = 0, n.End
	for ; o > n.Start; k++ {
		_, o = entryBefore(n.Data, o)
	}
	if o != n.Start || k != n.Count {
		return fmt.Errorf("chunk [%d,%d) count %d: %d entries backward, ending at %d", n.Start, n.End, n.Count, k, o)
	}
	return nil
}

// checkChunks checks plist.go's invariants on key L's quicklist.
func checkChunks(t *testing.T, s *Server) {
	_, e := s.root.DBs[0].find([]byte("L"), hashKey([]byte("L")))
	if e == nil || e.Coll == nil {
		return
	}
	c, total := e.Coll, int64(0)
	var prev *pLNode
	for n := c.Head; n != nil; prev, n = n, n.Next {
		if n.Count <= 0 || n.Prev != prev || n.Start < 0 || n.Start > n.End || n.End > int64(len(n.Data)) {
			t.Fatalf("bad chunk: start %d end %d count %d cap %d", n.Start, n.End, n.Count, len(n.Data))
		}
		if err := checkEntries(n); err != nil {
			t.Fatal(err)
		}
		total += n.Count
	}
	if c.Tail != prev || total != c.Len {
		t.Fatalf("tail/len wrong: counted %d, Len %d", total, c.Len)
	}
}

func TestListInPlace(t *testing.T) {
	ctx := context.Background()
	dir := tmpDir(t)
	s, c := start(t, dir+"/l.pool", 0)
	model := seedList(t, c, 1500)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 600; i++ {
		op := randListOp(r)
		var want int64
		model, want = op.apply(model)
		got, err := op.send(ctx, c)
		if err != nil || got != want {
			t.Fatalf("op %d %+v: got %d (%v), want %d", i, op, got, err, want)
		}
		checkChunks(t, s) // the executor is idle: the reply came
	}
	if got := c.LRange(ctx, "L", 0, -1).Val(); !slices.Equal(got, model) {
		t.Fatalf("list differs from the model (%d vs %d elements)", len(got), len(model))
	}
	c.Close()
	s.Close()
	_, c2 := start(t, dir+"/l.pool", 0)
	if got := c2.LRange(ctx, "L", 0, -1).Val(); !slices.Equal(got, model) {
		t.Fatalf("after reopen: list differs from the model (%d vs %d elements)", len(got), len(model))
	}
	if n := c2.LRem(ctx, "L", 0, "x").Val(); n != 0 {
		t.Fatal(n)
	}
	for _, v := range []string{"0", "1", "2", "3", "4", "5", "6", "7"} {
		c2.LRem(ctx, "L", 0, v)
	}
	for _, v := range model {
		c2.LRem(ctx, "L", 0, v)
	}
	if n := c2.Exists(ctx, "L").Val(); n != 0 {
		t.Fatalf("emptied list still exists: %d", n)
	}
}

// listKills is how many times TestListInPlaceKill kills the server.
const listKills = 12

// TestListInPlaceKill kills the server during a stream of LREM/LINSERT.
func TestListInPlaceKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ctx := context.Background()
	dir := tmpDir(t)
	bin := buildServer(t)
	r := rand.New(rand.NewPCG(3, 4))
	var model []string
	done := 0
	for k := 0; k < lives(listKills); k++ {
		cmd, c := runServer(t, bin, filepath.Join(dir, "k.pool"))
		if k == 0 {
			model = seedList(t, c, 3000)
		}
		got := c.LRange(ctx, "L", 0, -1).Val()
		if !slices.Equal(got, model) {
			t.Fatalf("kill %d: the list (%d elements) is not the acknowledged one (%d)", k, len(got), len(model))
		}
		stop := make(chan []string)
		var stopped error
		gr := rand.New(rand.NewPCG(5, uint64(k)))
		go func() {
			l := model
			for {
				op := randListOp(gr)
				next, _ := op.apply(slices.Clone(l))
				if _, err := op.send(ctx, c); err != nil {
					// In flight at the kill: it may or may not have committed.
					stopped = err
					stop <- next
					stop <- l
					return
				}
				l = next
				done++
			}
		}()
		time.Sleep(time.Duration(10+r.IntN(40)) * time.Millisecond)
		killServer(t, k, cmd)
		inflight, acked := <-stop, <-stop
		writerStopped(t, k, stopped)
		c.Close()
		model = resolveRestart(t, bin, dir, acked, inflight)
	}
	if done == 0 {
		t.Fatal("no operation was acknowledged")
	}
	t.Logf("%d kills during %d acknowledged LREM/LINSERT on a 3000-element list", lives(listKills), done)
}

// resolveRestart reopens the pool and returns which state the list is in:
// the acknowledged one or the one with the in-flight operation applied.
func resolveRestart(t *testing.T, bin string, dir string, acked, inflight []string) []string {
	cmd, c := runServer(t, bin, filepath.Join(dir, "k.pool"))
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	defer c.Close()
	got := c.LRange(context.Background(), "L", 0, -1).Val()
	switch {
	case slices.Equal(got, acked):
		return acked
	case slices.Equal(got, inflight):
		return inflight
	}
	t.Fatalf("after a kill the list (%d elements) is neither the acknowledged one (%d) nor that with the operation in flight (%d)",
		len(got), len(acked), len(inflight))
	return nil
}

// TestListEntries: elements of every length class (empty, the longest
// short one, the first long ones, one of 70,000 bytes) packed into one
// chunk read back the same from either end.
func TestListEntries(t *testing.T) {
	var vals [][]byte
	for _, n := range []int{0, 1, 3, entryShort, entryShort + 1, entryLong, 300, 70000} {
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(i*7 + n)
		}
		vals = append(vals, v)
	}
	size := int64(0)
	for _, v := range vals {
		size += entrySize(len(v))
	}
	n := &pLNode{Data: make([]byte, size+3), Start: 3, End: 3}
	for _, v := range vals {
		e := n.End + entrySize(len(v))
		putEntry(n.Data[n.End:e], v)
		n.End, n.Count = e, n.Count+1
	}
	if err := checkEntries(n); err != nil {
		t.Fatal(err)
	}
	for k, v := range vals {
		got, _ := entryAt(n.Data, n.offsetOf(int64(k)))
		if !slices.Equal(got, v) || len(got) != len(v) {
			t.Fatalf("entry %d: %d bytes, want %d", k, len(got), len(v))
		}
	}
	for k, got := range n.entries() {
		if !slices.Equal(got, vals[k]) {
			t.Fatalf("entries()[%d] differs", k)
		}
	}
}
