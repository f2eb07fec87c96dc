// block_test.go: blocked clients. Each deferred client's command is sent
// only after the previous one is seen blocked (INFO's blocked_clients), so
// the order the server sees is the order the test means: two clients'
// commands sent microseconds apart on two connections may otherwise reach
// the executor in either order (each connection has its own reader).
package redis

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func waitBlocked(t *testing.T, c *rawClient, n int) {
	for i := 0; i < 2000; i++ {
		if strings.Contains(c.do([]string{"INFO", "clients"}), "blocked_clients:"+strconv.Itoa(n)+"\r\n") {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never saw %d blocked clients", n)
}

// TestBRPOPLPUSHMultipleBlocked is the suite's "BRPOPLPUSH with multiple
// blocked clients": the first client's destination has the wrong type, so
// it gets WRONGTYPE and the element goes on to the second.
func TestBRPOPLPUSHMultipleBlocked(t *testing.T) {
	s, _ := start(t, filepath.Join(tmpDir(t), "b.pool"), 0)
	r, rd1, rd2 := dialRaw(t, s.Addr()), dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	r.do([]string{"SET", "target1", "nolist"})
	rd1.send([]string{"BRPOPLPUSH", "blist", "target1", "0"})
	waitBlocked(t, r, 1)
	rd2.send([]string{"BRPOPLPUSH", "blist", "target2", "0"})
	waitBlocked(t, r, 2)
	r.do([]string{"LPUSH", "blist", "foo"})
	if got := rd1.read("brpoplpush"); !strings.HasPrefix(got, "-WRONGTYPE") {
		t.Fatalf("rd1: %s", got)
	}
	if got := rd2.read("brpoplpush"); got != "$foo" {
		t.Fatalf("rd2: %s", got)
	}
	if got := r.do([]string{"LRANGE", "target2", "0", "-1"}); got != "[$foo]" {
		t.Fatalf("target2: %s", got)
	}
}

// TestBlockingZSetPops: BZPOPMIN/BZMPOP wake on ZADD, time out with a null
// array; a BLPOP on a key that becomes a sorted set stays blocked.
func TestBlockingZSetPops(t *testing.T) {
	s, _ := start(t, filepath.Join(tmpDir(t), "z.pool"), 0)
	r, rd1, rd2 := dialRaw(t, s.Addr()), dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	rd1.send([]string{"BZPOPMIN", "z1", "z2", "0"})
	waitBlocked(t, r, 1)
	rd2.send([]string{"BLPOP", "z2", "0.3"})
	waitBlocked(t, r, 2)
	r.do([]string{"ZADD", "z2", "2", "b", "1", "a"})
	if got := rd1.read("bzpopmin"); got != "[$z2,$a,$1]" {
		t.Fatalf("BZPOPMIN: %s", got)
	}
	if got := rd2.read("blpop"); got != "nilarray" {
		t.Fatalf("BLPOP on a sorted set: %s", got)
	}
	rd1.send([]string{"BZMPOP", "0", "2", "z3", "z4", "MAX", "COUNT", "5"})
	waitBlocked(t, r, 1)
	r.do([]string{"ZADD", "z3", "5", "e", "4", "d"})
	if got := rd1.read("bzmpop"); got != "[$z3,[[$e,$5],[$d,$4]]]" {
		t.Fatalf("BZMPOP: %s", got)
	}
	if got := r.do([]string{"BZPOPMAX", "nothing", "0.05"}); got != "nilarray" {
		t.Fatalf("timeout: %s", got)
	}
	if got := r.do([]string{"ZMPOP", "1", "z2", "MIN"}); got != "[$z2,[[$b,$2]]]" {
		t.Fatalf("ZMPOP: %s", got)
	}
	if got := r.do([]string{"EXISTS", "z2"}); got != ":0" {
		t.Fatalf("emptied z2: %s", got)
	}
}

// TestArrivalOrder sends the two BRPOPLPUSHs back to back, without waiting
// for the first to block (as the suite does), then LPUSH. Before arrival
// ordering (arrival.go) about half the rounds served the second client
// first. The count depends on scheduling, so it is only logged unless
// ENGRAM_REDIS_ORDER=1 (then every round must keep the order).
func TestArrivalOrder(t *testing.T) {
	s, _ := start(t, filepath.Join(tmpDir(t), "o.pool"), 0)
	rounds, inverted := 20, 0
	for i := 0; i < rounds; i++ {
		r, rd1, rd2 := dialRaw(t, s.Addr()), dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
		r.do([]string{"DEL", "bl", "t1", "t2"})
		r.do([]string{"SET", "t1", "nolist"})
		rd1.send([]string{"BRPOPLPUSH", "bl", "t1", "0"})
		rd2.send([]string{"BRPOPLPUSH", "bl", "t2", "0"})
		r.do([]string{"LPUSH", "bl", "foo"})
		if !strings.HasPrefix(rd1.read("brpoplpush"), "-WRONGTYPE") {
			inverted++
			r.do([]string{"LPUSH", "bl", "unblock"}) // the first client is still blocked
			rd1.read("brpoplpush")
		} else {
			rd2.read("brpoplpush")
		}
		for _, c := range []*rawClient{r, rd1, rd2} {
			c.c.Close()
		}
	}
	t.Logf("%d of %d rounds served the later client first", inverted, rounds)
	if os.Getenv("ENGRAM_REDIS_ORDER") == "1" && inverted > 0 {
		t.Fatalf("%d of %d rounds out of arrival order", inverted, rounds)
	}
}
