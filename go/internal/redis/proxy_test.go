// proxy_test.go: scale-out behind twemproxy (Debian's nutcracker). Three
// engram-redis processes (the built binary, pools under a temp dir) sit
// behind one nutcracker with ketama hashing; redis-benchmark and go-redis
// drive the proxy; one node is killed with SIGKILL while a writer runs and
// restarted on its pool and port; afterwards every write the proxy
// acknowledged is read back through the proxy. Then the node is killed
// again and another engram-redis takes its port meanwhile (as any process
// on this shared machine may): the node comes back on a new port, the
// proxy is restarted with it (ketama hashes the node's name, not its
// address, so its keys stay on it), and every acknowledged key is read
// back again. Every node is used only once INFO's process_id says it is
// the process started (startOwned). Skipped when nutcracker is not installed
// (`make test-redis-proxy` installs it and sets ENGRAM_REDIS_PROXY=1, so
// the test does not run a second time in test-redis).
package redis

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// noHello is a connection to twemproxy on which a HELLO written by the
// client is not sent but answered with Redis's unknown-command error.
type noHello struct {
	net.Conn
	pending []byte
}

func dialNoHello(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	return &noHello{Conn: c}, err
}

func (c *noHello) Write(b []byte) (int, error) {
	if i := bytes.Index(b, []byte("\r\n")); i > 0 && b[0] == '*' && bytes.HasPrefix(bytes.ToLower(b[i+2:]), []byte("$5\r\nhello\r\n")) {
		c.pending = append(c.pending, "-ERR unknown command 'HELLO'\r\n"...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *noHello) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

type proxyNode struct {
	name string
	port int
	pool string
	cmd  *exec.Cmd
}

// start starts the node's server on its port and waits until that port
// answers as this process (startOwned); false if the server exited (it
// could not bind the port) or another process answers there.
func (n *proxyNode) start(t *testing.T, bin string) bool {
	t.Helper()
	cmd, c := startOwned(t, bin, n.port, []string{"--pool", n.pool})
	if c == nil {
		return false
	}
	c.Close()
	n.cmd = cmd
	return true
}

// startAnywhere starts the node on a free port (its own port first when it
// has one), trying up to 10 ports.
func (n *proxyNode) startAnywhere(t *testing.T, bin string) {
	t.Helper()
	for try := 0; try < 10; try++ {
		if n.port != 0 && n.start(t, bin) {
			return
		}
		n.port = freePort(t)
	}
	t.Fatalf("%s did not come up as itself on any of 10 ports", n.name)
}

func (n *proxyNode) kill() {
	n.cmd.Process.Kill()
	n.cmd.Wait()
}

// proxy is a nutcracker over some nodes, and a client of it.
type proxy struct {
	dir, listen string
	cmd         *exec.Cmd
	c           *goredis.Client
}

// startNutcracker writes a twemproxy pool over nodes (by name, so that a
// node's keys do not move with its port), starts it and connects a client.
func startNutcracker(t *testing.T, dir string, nodes []*proxyNode) *proxy {
	t.Helper()
	if _, err := exec.LookPath("nutcracker"); err != nil {
		t.Skip("nutcracker (twemproxy) not installed")
	}
	p := &proxy{dir: dir, listen: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	p.start(t, nodes)
	return p
}

// start writes the pool's configuration and starts nutcracker on
// p.listen, with a client once PING answers through it; a nutcracker that
// exits (its port taken meanwhile) is started again on another port.
func (p *proxy) start(t *testing.T, nodes []*proxyNode) {
	t.Helper()
	bin, _ := exec.LookPath("nutcracker")
	for try := 0; try < 10; try++ {
		conf := fmt.Sprintf("engram:\n  listen: %s\n  hash: fnv1a_64\n  distribution: ketama\n  redis: true\n"+
			"  auto_eject_hosts: false\n  timeout: 10000\n  server_retry_timeout: 200\n  servers:\n", p.listen)
		for _, n := range nodes {
			conf += fmt.Sprintf("   - 127.0.0.1:%d:1 %s\n", n.port, n.name)
		}
		path := filepath.Join(p.dir, "nutcracker.yml")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", path, "-s", strconv.Itoa(freePort(t)), "-a", "127.0.0.1", "-o", filepath.Join(p.dir, "nutcracker.log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		// twemproxy 0.5 speaks RESP2 and closes a connection that sends HELLO
		// or CLIENT SETINFO, which go-redis v9 sends first: the dialer answers
		// HELLO itself (unknown command, so go-redis goes on in RESP2).
		c := goredis.NewClient(&goredis.Options{Addr: p.listen, Protocol: 2, DisableIdentity: true, MaxRetries: -1, Dialer: dialNoHello,
			DialTimeout: time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second})
		for i := 0; i < 100 && !exited(cmd.Process.Pid); i++ {
			if c.Ping(context.Background()).Err() == nil && !exited(cmd.Process.Pid) {
				p.cmd, p.c = cmd, c
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
		t.Logf("nutcracker did not come up on %s: trying another port", p.listen)
		p.listen = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	t.Fatal("nutcracker did not come up on any of 10 ports")
}

// restart stops nutcracker and starts it over nodes (their ports now).
func (p *proxy) restart(t *testing.T, nodes []*proxyNode) {
	t.Helper()
	p.c.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.start(t, nodes)
}

func TestTwemproxy(t *testing.T) {
	if os.Getenv("ENGRAM_REDIS_PROXY") == "" {
		t.Skip("ENGRAM_REDIS_PROXY unset (make test-redis-proxy sets it)")
	}
	if _, err := exec.LookPath("nutcracker"); err != nil {
		t.Skip("nutcracker (twemproxy) not installed")
	}
	dir := tmpDir(t)
	bin := buildServer(t)
	var nodes []*proxyNode
	for i := 0; i < 3; i++ {
		n := &proxyNode{name: "node" + strconv.Itoa(i), pool: filepath.Join(dir, fmt.Sprintf("node%d.pool", i))}
		n.startAnywhere(t, bin)
		t.Cleanup(n.kill)
		nodes = append(nodes, n)
	}
	p := startNutcracker(t, dir, nodes)
	defer func() { p.c.Close() }()
	ctx := context.Background()
	if rb, err := exec.LookPath("redis-benchmark"); err == nil {
		host, port := p.listen[:len(p.listen)-len(portOf(p.listen))-1], portOf(p.listen)
		out, err := exec.Command(rb, "-h", host, "-p", port, "-t", "set,get,incr,lpush,hset", "-n", "2000", "-c", "10", "-r", "1000", "--csv").CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark through nutcracker: %v\n%s", err, out)
		}
		t.Logf("redis-benchmark through nutcracker:\n%s", out)
	}
	acked := writeThroughProxy(t, p.c, 0, 600, -1, nil)
	held := func() []int64 { // keys (redis-benchmark's and p:*) on each node
		var ks []int64
		for i, n := range nodes {
			nc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(n.port)})
			k, err := nc.DBSize(ctx).Result()
			nc.Close()
			if err != nil || k == 0 {
				t.Fatalf("node%d holds %d keys (%v)", i, k, err)
			}
			ks = append(ks, k)
		}
		return ks
	}
	before := held() // ketama spread the keys over all three
	// 1. Kill node1 under a running writer: writes routed to it fail (not
	//    acknowledged), the others go on; then restart it on its pool and
	//    its port (another process may have taken the port meanwhile: then
	//    on a new port, with the proxy restarted).
	more := writeThroughProxy(t, p.c, 600, 1200, 700, nodes[1].kill)
	if len(more) <= 100 || len(more) == 600 {
		t.Fatalf("%d of the 600 writes around node1's kill (at the 100th) were acknowledged: want some after it (the other nodes) and not all (node1's)", len(more))
	}
	restartNode(t, bin, p, nodes, 1)
	for k, v := range more {
		acked[k] = v
	}
	readBack(t, p.c, acked, "node1's kill and restart")
	if n := lastBeforeKill(t, nodes[1], 600, 700); n == 0 {
		t.Fatal("node1 holds none of the 100 keys written just before its kill: the kill did not follow writes to it")
	} else {
		t.Logf("node1 holds %d of the 100 keys acknowledged just before its kill", n)
	}
	// 2. Kill node1 again, and let another engram-redis (its own pool, the
	//    same key names with other values) take its port meanwhile.
	nodes[1].kill()
	foreign := &proxyNode{name: "foreign", port: nodes[1].port, pool: filepath.Join(dir, "foreign.pool")}
	if !foreign.start(t, bin) {
		t.Skipf("port %d was taken by yet another process", foreign.port)
	}
	t.Cleanup(foreign.kill)
	fc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(foreign.port)})
	for k := range acked {
		fc.Set(ctx, k, "foreign", 0)
	}
	fc.Close()
	restartNode(t, bin, p, nodes, 1)
	readBack(t, p.c, acked, "node1's second restart, on a new port")
	if nodes[1].port == foreign.port {
		t.Fatalf("node1 restarted on port %d, which the foreign server holds", foreign.port)
	}
	t.Logf("keys on node0..2 before the kills %v, at the end %v", before, held())
	t.Logf("%d acknowledged keys read back through nutcracker after node1's kill and restart, and again after it moved to port %d", len(acked), nodes[1].port)
}

// lastBeforeKill is how many of proxyKey(from)..proxyKey(to-1) node n
// holds (asked directly, not through the proxy).
func lastBeforeKill(t *testing.T, n *proxyNode, from, to int) int {
	t.Helper()
	nc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(n.port)})
	defer nc.Close()
	var keys []string
	for i := from; i < to; i++ {
		keys = append(keys, proxyKey(i))
	}
	vals, err := nc.MGet(context.Background(), keys...).Result()
	if err != nil {
		t.Fatalf("%s: MGET: %v", n.name, err)
	}
	held := 0
	for _, v := range vals {
		if v != nil {
			held++
		}
	}
	return held
}

// restartNode restarts nodes[i] on its pool: on its own port if it comes up
// there as itself, else (another process took the port) on a new one, and
// then nutcracker is restarted over the new ports.
func restartNode(t *testing.T, bin string, p *proxy, nodes []*proxyNode, i int) {
	t.Helper()
	if nodes[i].start(t, bin) {
		return
	}
	t.Logf("%s's port %d is taken by another process: restarting it on another port, and nutcracker with it", nodes[i].name, nodes[i].port)
	nodes[i].port = 0
	nodes[i].startAnywhere(t, bin)
	p.restart(t, nodes)
}

// readBack reads every acknowledged key through the proxy (retrying while
// the proxy reconnects to a restarted node) and fails on any that differs.
func readBack(t *testing.T, c *goredis.Client, acked map[string]string, when string) {
	t.Helper()
	missing := 0
	for k, v := range acked {
		var got string
		var err error
		for try := 0; try < 50; try++ {
			if got, err = c.Get(context.Background(), k).Result(); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got != v {
			missing++
			if missing <= 10 {
				t.Errorf("after %s: %s = %q (%v), acknowledged %q", when, k, got, err, v)
			}
		}
	}
	if missing > 0 || len(acked) < 600 {
		t.Fatalf("after %s: %d of %d acknowledged keys missing", when, missing, len(acked))
	}
}

// writeThroughProxy SETs proxyKey(from)..proxyKey(to-1) through the
// proxy, calling hook before key at, and returns the acknowledged ones.
func writeThroughProxy(t *testing.T, c *goredis.Client, from, to, at int, hook func()) map[string]string {
	acked := map[string]string{}
	for i := from; i < to; i++ {
		if i == at {
			hook()
		}
		k, v := proxyKey(i), "v"+strconv.Itoa(i)
		if c.Set(context.Background(), k, v, 0).Err() == nil {
			acked[k] = v
		}
	}
	return acked
}

// proxyKey is the i-th key the test writes: "p:<i>:<i times an odd
// constant, base 36>" (distinct for distinct i). Plain "p:<i>" clusters by
// range under FNV-1a and ketama (one run put 100 of the first 600 on
// node1 and none of the 100 written just before its kill); the scrambled
// suffix spreads consecutive keys over the nodes.
func proxyKey(i int) string {
	return "p:" + strconv.Itoa(i) + ":" + strconv.FormatUint(uint64(i)*0x9E3779B97F4A7C15, 36)
}
