// proxy_test.go: scale-out behind twemproxy (Debian's nutcracker). Three
// engram-redis processes (the built binary, pools under a temp dir) sit
// behind one nutcracker with ketama hashing; redis-benchmark and go-redis
// drive the proxy; one node is killed with SIGKILL while a writer runs and
// restarted on its pool; afterwards every write the proxy acknowledged is
// read back through the proxy. Skipped when nutcracker is not installed
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

// buildServer builds go/cmd/engram-redis into dir.
func buildServer(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "engram-redis")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/engram-pm/engram-go/cmd/engram-redis").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

type proxyNode struct {
	port int
	pool string
	cmd  *exec.Cmd
}

func (n *proxyNode) start(t *testing.T, bin string) {
	t.Helper()
	n.cmd = exec.Command(bin, "--port", strconv.Itoa(n.port), "--pool", n.pool)
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(n.port), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	waitUp(t, c)
}

func (n *proxyNode) kill() {
	n.cmd.Process.Kill()
	n.cmd.Wait()
}

// startNutcracker writes a twemproxy pool over nodes and starts it.
func startNutcracker(t *testing.T, dir string, nodes []*proxyNode) string {
	t.Helper()
	bin, err := exec.LookPath("nutcracker")
	if err != nil {
		t.Skip("nutcracker (twemproxy) not installed")
	}
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	conf := fmt.Sprintf("engram:\n  listen: %s\n  hash: fnv1a_64\n  distribution: ketama\n  redis: true\n"+
		"  auto_eject_hosts: false\n  timeout: 10000\n  server_retry_timeout: 200\n  servers:\n", listen)
	for i, n := range nodes {
		conf += fmt.Sprintf("   - 127.0.0.1:%d:1 node%d\n", n.port, i)
	}
	path := filepath.Join(dir, "nutcracker.yml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := exec.Command(bin, "-c", path, "-s", strconv.Itoa(freePort(t)), "-a", "127.0.0.1", "-o", filepath.Join(dir, "nutcracker.log"))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill(); p.Wait() })
	return listen
}

func TestTwemproxy(t *testing.T) {
	if os.Getenv("ENGRAM_REDIS_PROXY") == "" {
		t.Skip("ENGRAM_REDIS_PROXY unset (make test-redis-proxy sets it)")
	}
	if _, err := exec.LookPath("nutcracker"); err != nil {
		t.Skip("nutcracker (twemproxy) not installed")
	}
	dir := tmpDir(t)
	bin := buildServer(t, dir)
	var nodes []*proxyNode
	for i := 0; i < 3; i++ {
		n := &proxyNode{port: freePort(t), pool: filepath.Join(dir, fmt.Sprintf("node%d.pool", i))}
		n.start(t, bin)
		t.Cleanup(n.kill)
		nodes = append(nodes, n)
	}
	addr := startNutcracker(t, dir, nodes)
	// twemproxy 0.5 speaks RESP2 and closes a connection that sends HELLO
	// or CLIENT SETINFO, which go-redis v9 sends first: the dialer answers
	// HELLO itself (unknown command, so go-redis goes on in RESP2).
	c := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, Dialer: dialNoHello,
		DialTimeout: time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second})
	defer c.Close()
	ctx := context.Background()
	for i := 0; c.Ping(ctx).Err() != nil; i++ {
		if i == 100 {
			t.Fatalf("PING through nutcracker: %v", c.Ping(ctx).Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rb, err := exec.LookPath("redis-benchmark"); err == nil {
		host, port := addr[:len(addr)-len(portOf(addr))-1], portOf(addr)
		out, err := exec.Command(rb, "-h", host, "-p", port, "-t", "set,get,incr,lpush,hset", "-n", "2000", "-c", "10", "-r", "1000", "--csv").CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark through nutcracker: %v\n%s", err, out)
		}
		t.Logf("redis-benchmark through nutcracker:\n%s", out)
	}
	acked := writeThroughProxy(t, c, 0, 600, -1, nil)
	for i, n := range nodes { // ketama spread the keys over all three
		nc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(n.port)})
		if k, err := nc.DBSize(ctx).Result(); err != nil || k == 0 {
			t.Fatalf("node%d holds %d keys (%v)", i, k, err)
		}
		nc.Close()
	}
	// Kill node1 under a running writer: writes routed to it fail (not
	// acknowledged), the others go on; then restart it on its pool.
	more := writeThroughProxy(t, c, 600, 1200, 700, nodes[1].kill)
	nodes[1].start(t, bin)
	for k, v := range more {
		acked[k] = v
	}
	missing := 0
	for k, v := range acked {
		var got string
		var err error
		for try := 0; try < 50; try++ { // the proxy reconnects to the restarted node
			if got, err = c.Get(ctx, k).Result(); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got != v {
			missing++
			t.Errorf("%s = %q (%v), acknowledged %q", k, got, err, v)
		}
	}
	if missing > 0 || len(acked) < 600 {
		t.Fatalf("%d of %d acknowledged keys missing", missing, len(acked))
	}
	t.Logf("%d acknowledged keys read back through nutcracker after node1's kill and restart", len(acked))
}

// writeThroughProxy SETs p:from..p:to-1 through the proxy, calling hook
// before key at, and returns the acknowledged ones.
func writeThroughProxy(t *testing.T, c *goredis.Client, from, to, at int, hook func()) map[string]string {
	acked := map[string]string{}
	for i := from; i < to; i++ {
		if i == at {
			hook()
		}
		k, v := "p:"+strconv.Itoa(i), "v"+strconv.Itoa(i)
		if c.Set(context.Background(), k, v, 0).Err() == nil {
			acked[k] = v
		}
	}
	return acked
}
