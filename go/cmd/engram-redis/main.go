// Command engram-redis is a Redis-compatible server whose data lives in an
// Engram pool: every acknowledged write is durable, restart needs no AOF or
// RDB load (docs/redis.md).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"

	engram "github.com/engram-pm/engram-go"
	"github.com/engram-pm/engram-go/internal/redis"
)

func main() {
	port := flag.Int("port", 6379, "TCP port")
	bind := flag.String("bind", "127.0.0.1", "address to listen on")
	dir := flag.String("dir", ".", "directory of the pool file")
	pool := flag.String("pool", "", "pool file (default <dir>/redis.pool)")
	maxmem := flag.String("maxmemory", "0", "the pool's maximum size (bytes, or 100mb / 2gb); 0: engine default")
	pass := flag.String("requirepass", "", "password clients must AUTH with")
	dur := flag.String("durability", "auto", "auto | pmem | msync | wal | process")
	maxClients := flag.Int("maxclients", 10000, "connections beyond are refused (the open-file limit is raised to this + 32)")
	io := flag.String("io", "epoll", "how connections are read: epoll (event loops; Linux) or goroutines (a reader goroutine per connection; the fallback elsewhere)")
	ioLoops := flag.Int("io-loops", 1, "epoll event loops (--io epoll)")
	rgc := flag.String("recovery-gc", "background", "after a crash, collect the crash's garbage in the background while serving (background) or before serving (eager)")
	flag.Parse()
	if os.Getenv("GOGC") == "" {
		// The data lives in the pool; the Go heap holds only connection
		// buffers and parsed commands, so a collection every 5x of it
		// (instead of 2x) costs little memory and a quarter of the GC CPU.
		debug.SetGCPercent(400)
	}
	p := *pool
	if p == "" {
		p = filepath.Join(*dir, "redis.pool")
	}
	mm, err := parseSize(*maxmem)
	if err != nil {
		fmt.Fprintln(os.Stderr, "engram-redis: --maxmemory:", err)
		os.Exit(2)
	}
	d := map[string]engram.Durability{"auto": engram.Auto, "pmem": engram.Pmem, "msync": engram.Msync, "wal": engram.Wal, "process": engram.Process}
	mode, ok := d[*dur]
	if !ok {
		fmt.Fprintln(os.Stderr, "engram-redis: --durability must be auto, pmem, msync, wal or process")
		os.Exit(2)
	}
	if *rgc != "background" && *rgc != "eager" {
		fmt.Fprintln(os.Stderr, "engram-redis: --recovery-gc must be background or eager")
		os.Exit(2)
	}
	if *io != "epoll" && *io != "goroutines" {
		fmt.Fprintln(os.Stderr, "engram-redis: --io must be epoll or goroutines")
		os.Exit(2)
	}
	cfg := redis.Config{IO: *io, IOLoops: *ioLoops, EagerRecoveryGC: *rgc == "eager", Addr: *bind + ":" + strconv.Itoa(*port), Pool: p, MaxMemory: mm, RequirePass: *pass, Durability: mode, MaxClients: *maxClients,
		Handoff: os.Getenv("ENGRAM_REDIS_HANDOFF") == "1"}
	// ENGRAM_REDIS_CPUPROFILE=FILE: a Go CPU profile of the whole run,
	// written at SHUTDOWN (go tool pprof FILE; docs/redis.md, profiling).
	if f := os.Getenv("ENGRAM_REDIS_CPUPROFILE"); f != "" {
		out, err := os.Create(f)
		if err == nil {
			err = pprof.StartCPUProfile(out)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "engram-redis: ENGRAM_REDIS_CPUPROFILE:", err)
			os.Exit(2)
		}
		defer func() { pprof.StopCPUProfile(); out.Close() }()
	}
	if err := redis.Run(cfg, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "engram-redis:", err)
		os.Exit(1)
	}
}

func parseSize(s string) (uint64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range []struct {
		suf string
		m   uint64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n * mult, err
}
