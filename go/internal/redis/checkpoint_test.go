// checkpoint_test.go: the kill -9 torture in wal mode with the log's
// checkpoint made frequent. TestKill9Disk never checkpoints: a checkpoint
// (the log copied into the pool file, the pool fsync'ed, a new log
// generation) runs when the log passes 16 MiB, which no run between two
// kills writes. TestKill9Checkpoint runs the server with
// ENGRAM_WAL_CHECKPOINT_BYTES (read by the C ABI when it opens the pool)
// at 8 KiB, so a checkpoint runs every few commits; it checks that one
// did before every kill (the log header's salt changed), aims every other
// kill at a checkpoint in progress (a server thread in fsync(2) of the pool
// file, which in wal mode only a checkpoint does), and kills the server
// during its start now and then (the open replays the log into the pool
// file and starts a new generation: a checkpoint of its own). After each
// restart every acknowledged write must be there and no MULTI partly.
//
// What kill -9 cannot test: the page cache survives a process kill, so
// the order of the checkpoint's fsync and the new salt matters only to a
// power failure; the wal crash explorer (crates/engram/tests/wal.rs)
// covers that. Nothing here writes outside the test's temp directory.
package redis

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ckptBytes is TestKill9Checkpoint's checkpoint size: the log header is
// 4 KiB, so a checkpoint runs after about 4 KiB of records.
const ckptBytes = 8 << 10

// ckptRounds is how many writer rounds (a SET, a MULTI of two INCRs, every
// other round a MULTI of four pushes) each life completes before it is
// killed: several checkpoints' worth of log.
const ckptRounds = 20

// TestKill9Checkpoint is the wal kill test with a checkpoint every few
// commits (see the file comment). ENGRAM_REDIS_KILLS sets the number of
// kills (default 30); ENGRAM_REDIS_DISK_DIR the directory.
func TestKill9Checkpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := diskDir(t)
	during, aimed := 0, fsyncSyscall() != ""
	plan := killPlan{dir: dir, mode: "wal", kills: killCount(30), rounds: ckptRounds, startKills: 5,
		env: []string{"ENGRAM_WAL_CHECKPOINT_BYTES=" + strconv.Itoa(ckptBytes)}}
	plan.afterOpen = func(t *testing.T, l *killLife) { l.salt = logSalt(t, l.pool) }
	plan.beforeKill = func(t *testing.T, l *killLife) {
		if logSalt(t, l.pool) == l.salt {
			t.Fatalf("kill %d: no checkpoint in %d writer rounds (the log's salt is the open's): is ENGRAM_WAL_CHECKPOINT_BYTES passed on?", l.k, ckptRounds)
		}
	}
	plan.aim = func(t *testing.T, l *killLife) string {
		if aimed && l.k%2 == 1 {
			if inPoolFsync(t, l, 3*time.Second) {
				during++
				return "during a checkpoint's pool fsync"
			}
			return "aimed, no checkpoint fsync seen in 3 s"
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		return "random, after checkpoints"
	}
	runKills(t, plan)
	if aimed && plan.kills >= 10 && during == 0 {
		t.Fatal("no kill landed during a checkpoint's pool fsync")
	}
}

// logSalt is the salt in the header of pool's write-ahead log (`<pool>.wal`,
// bytes 16..24; docs/format.md, "Write-ahead log"): every new generation
// (a checkpoint, or an open) writes a new one.
func logSalt(t *testing.T, pool string) uint64 {
	t.Helper()
	f, err := os.Open(pool + ".wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], 16); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// fsyncSyscall is fsync(2)'s number in /proc/PID/syscall on this machine
// ("" where the test does not know it: kills are then not aimed).
func fsyncSyscall() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	switch runtime.GOARCH {
	case "amd64":
		return "74"
	case "arm64":
		return "82"
	}
	return ""
}

// inPoolFsync waits (at most limit) until a thread of l's server is in
// fsync(2) of its pool file, which in wal mode a checkpoint does after it
// copied the log into the file (and a growth of the file, which this
// test's small pool never needs); false if none was seen.
func inPoolFsync(t *testing.T, l *killLife, limit time.Duration) bool {
	pool, err := filepath.Abs(l.pool)
	if err == nil {
		pool, err = filepath.EvalSymlinks(pool)
	}
	if err != nil {
		t.Fatal(err)
	}
	pid := l.cmd.Process.Pid
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return false
		}
		for _, task := range tasks {
			if fd, ok := fsyncFd(pid, task.Name()); ok {
				if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); link == pool {
					return true
				}
			}
		}
	}
	return false
}

// fsyncFd is the descriptor thread tid of pid is in fsync(2) on, if it is.
func fsyncFd(pid int, tid string) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, tid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 || f[0] != fsyncSyscall() {
		return 0, false
	}
	fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	return fd, err == nil
}

// killDuringStart starts the server with args and env and kills it at a
// random moment within max of its start (the mean restart so far): mostly
// in the pool's open, where the log is replayed into the pool file and a
// new generation started, then undo recovery runs. Returns the kind of
// kill: whether the port was listening yet.
func killDuringStart(t *testing.T, bin string, env []string, args []string, max time.Duration) string {
	port := freePort(t)
	cmd := serverCmd(env, bin, port, args)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	time.Sleep(time.Duration(rand.Int64N(int64(max) + 1)))
	kind := "during a start (not listening yet)"
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 50*time.Millisecond); err == nil {
		c.Close()
		kind = "just after a start (listening)"
	}
	cmd.Process.Kill()
	cmd.Wait()
	return kind
}
