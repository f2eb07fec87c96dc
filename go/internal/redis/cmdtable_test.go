// cmdtable_test.go: commands.json against the dispatch table, and COMMAND
// INFO / COMMAND DOCS against redis-server 7.0.15 for every command, in
// RESP2 and RESP3.
package redis

import (
	"strconv"
	"testing"
)

// TestCommandTable: every registered command has a table entry whose
// arity and key positions (first, last, step) are the reg call's.
func TestCommandTable(t *testing.T) {
	if len(cmdTable) == 0 {
		t.Fatal("commands.json did not parse")
	}
	for _, n := range sortedNames() {
		meta, ok := cmdTable[n]
		if !ok {
			t.Errorf("%s: not in commands.json (run gen-commands.py)", n)
			continue
		}
		c, it := commands[n], meta.Info.items
		got := [4]int64{it[1].n, it[3].n, it[4].n, it[5].n}
		want := [4]int64{int64(c.arity), int64(c.first), int64(c.last), int64(c.step)}
		if got != want {
			t.Errorf("%s: Redis 7.0 arity/first/last/step %v, reg %v", n, got, want)
		}
	}
}

// TestCommandInfoDocs sends COMMAND INFO and COMMAND DOCS for every
// command to both servers, in RESP2 and RESP3, and compares in full.
func TestCommandInfoDocs(t *testing.T) {
	dir := tmpDir(t)
	realAddr := startRealRedis(t, dir)
	s, _ := start(t, dir+"/c.pool", 0)
	for _, proto := range []int{2, 3} {
		real, ours := dialRaw(t, realAddr), dialRaw(t, s.Addr())
		real.exchange([]string{"HELLO", strconv.Itoa(proto)})
		ours.exchange([]string{"HELLO", strconv.Itoa(proto)})
		for _, n := range sortedNames() {
			for _, args := range [][]string{{"COMMAND", "INFO", n}, {"COMMAND", "DOCS", n}} {
				real.send(args)
				ours.send(args)
				a, errA := readReply(real.r)
				b, errB := readReply(ours.r)
				if errA != nil || errB != nil {
					t.Fatalf("%v: %v / %v", args, errA, errB)
				}
				// A container's subcommands come in the order of Redis's
				// dict, which its random hash seed changes from run to run.
				mode := byte('=')
				if len(cmdTable[n].Info.items) > 9 && len(cmdTable[n].Info.items[9].items) > 0 {
					mode = 's'
				}
				if wa, wb := a.render(mode), b.render(mode); wa != wb {
					t.Errorf("RESP%d %v:\n redis-server: %.300s\n engram-redis: %.300s", proto, args, wa, wb)
				}
			}
		}
		real.c.Close()
		ours.c.Close()
	}
}

// TestCommandFlagsCopied: reg copies the denyoom flag (maxmem.go) and the
// logging-ahead set (prelog.go) into each command, which dispatch and the
// warming read instead of the maps (a map lookup per command was ~3 % of
// INCR's server CPU at pipeline 16).
func TestCommandFlagsCopied(t *testing.T) {
	for name, cmd := range commands {
		if cmd.denyOOM != denyOOM[name] {
			t.Errorf("%s: denyOOM %v, the table says %v", name, cmd.denyOOM, denyOOM[name])
		}
		if cmd.prelog != prelogCmds[name] {
			t.Errorf("%s: prelog %v, prelogCmds says %v", name, cmd.prelog, prelogCmds[name])
		}
	}
	for _, name := range []string{"set", "incr", "mset"} {
		if c := commands[name]; c == nil || !c.prelog || !c.denyOOM {
			t.Errorf("%s: not logged ahead or not refused over maxmemory: %+v", name, c)
		}
	}
}

// TestLookupCommandsRepeated: a pipeline's commands are looked up once
// per run of equal names; each still gets its own command.
func TestLookupCommandsRepeated(t *testing.T) {
	names := []string{"INCR", "INCR", "incr", "GET", "GET", "GETDEL", "nosuch", "nosuch", "INCR", "", "SET"}
	var cmds [][][]byte
	for _, n := range names {
		cmds = append(cmds, [][]byte{[]byte(n), []byte("k")})
	}
	defs := lookupCommands(nil, cmds)
	for i, n := range names {
		if want := lookupCommand([]byte(n)); defs[i] != want {
			t.Fatalf("command %d (%q): got %v, want %v", i, n, defs[i], want)
		}
	}
}
