// hexplore_test.go: the adds that grow a table (a big hash's fields by
// HSET, db 0's keys by INCR) as the executor runs them, a pipeline's or
// a batch of one-command requests (warmLone), with the insertion links
// and the growing table's bucket moves logged ahead (prelog.go:
// appendPrelog, appendRehashPrelog), through the crash explorer:
// every crash image must hold the keys and fields of a prefix of the
// regions, each table's count its entries and every entry found by its
// lookup.
package redis

import (
	"fmt"
	"strings"
	"testing"
)

// hexploreState is db 0's strings and h's fields; a table whose count or
// lookups disagree with its chains is an error (a bucket move torn).
func hexploreState(root *pRoot) (map[string]string, error) {
	st := map[string]string{}
	var bad error
	check := func(d *pDict, what string) {
		n := int64(0)
		d.each(func(e *pEntry) bool {
			n++
			if _, f := d.find(e.key(), hashKey(e.key())); f != e {
				bad = fmt.Errorf("%s %q: not found by its lookup", what, e.key())
			}
			return true
		})
		if n != d.Used {
			bad = fmt.Errorf("%s: %d entries, Used %d", what, n, d.Used)
		}
	}
	db := root.DBs[0]
	check(db, "db 0")
	db.each(func(e *pEntry) bool {
		if e.Coll == nil || e.Coll.Dict == nil {
			st[string(e.key())] = string(e.val())
			return true
		}
		check(e.Coll.Dict, string(e.key()))
		e.Coll.Dict.each(func(f *pEntry) bool {
			st[string(e.key())+"."+string(f.key())] = string(f.val())
			return true
		})
		return true
	})
	return st, bad
}

// hexploreSetup makes h a table of 17 fields and db 0 a table of 17 keys:
// both started growing (16 buckets at load 1) and moved a bucket or two.
func hexploreSetup() []string {
	lines := []string{"CONFIG SET hash-max-listpack-entries 4"}
	for i := 0; i < 17; i++ {
		lines = append(lines, fmt.Sprintf("HSET h f%d v", i))
	}
	for i := 0; i < 16; i++ {
		lines = append(lines, fmt.Sprintf("SET k%d %d", i, i))
	}
	return lines
}

// hexploreAdds is a region of new fields and new keys only: every add's
// rehash step moves what was guessed (the guesses hold).
var hexploreAdds = []string{"HSET h f20 a", "INCR c20", "HSET h f21 b", "INCR c21", "HSET h f22 c", "HSET h f1 v"}

// hexploreRemoves is a region whose removals take rehash steps first, so
// the last adds move buckets that were not guessed.
var hexploreRemoves = []string{"HDEL h f3", "DEL k4", "HDEL h f5", "DEL k6", "HSET h f23 a", "INCR c22", "HSET h f24 b", "INCR c23"}

// hexploreMoves are two regions of a field's value moving out of its
// inline entry (entry.go: longer than the bytes after its field) and
// back in, a value over its own array's bytes, and a field too long for
// an inline entry (a plain one) added and written.
var hexploreMoves = [][]string{
	{"HSET h f6 " + strings.Repeat("L", 45), "HSET h f7 ww", "HSET h " + strings.Repeat("F", 50) + " a",
		"HSET h f8 " + strings.Repeat("M", 45)},
	{"HSET h f6 s", "HSET h f8 " + strings.Repeat("N", 45), "HSET h " + strings.Repeat("F", 50) + " bb"},
}

// hexplorePipelines are the traced regions: adds alone (guesses that
// hold), a field overwritten in place and one holding its value already,
// values moving out of their entries and back (hexploreMoves), removals
// before adds (guesses that do not hold), one command alone, and enough
// adds to finish both tables' growth (finishRehash, guessed by the last
// step).
var hexplorePipelines = [][]string{
	hexploreAdds,
	{"HSET h f2 zz", "HSET h f0 v", "HSET h f25 a", "SET k1 x"},
	hexploreMoves[0],
	hexploreMoves[1],
	hexploreRemoves,
	{"HSET h f26 a"},
	{"INCR c24"},
	{"HSET h f30 a", "HSET h f31 a", "HSET h f32 a", "HSET h f33 a", "HSET h f34 a", "HSET h f35 a", "HSET h f36 a",
		"HSET h f37 a", "HSET h f38 a", "HSET h f39 a", "HSET h f40 a", "HSET h f41 a", "HSET h f42 a", "HSET h f43 a",
		"INCR c30", "INCR c31", "INCR c32", "INCR c33", "INCR c34", "INCR c35", "INCR c36", "INCR c37", "INCR c38", "INCR c39"},
}

func TestTableGrowthCrashExplorer(t *testing.T) {
	rep := exploreServer(t, hexploreSetup(), hexplorePipelines, hexploreState)
	t.Logf("%+v", rep)
}

// TestTableGrowthLoneCrashExplorer: the same regions as batches of
// one-command requests (warmLone logs them ahead together).
func TestTableGrowthLoneCrashExplorer(t *testing.T) {
	rep := exploreLone(t, hexploreSetup(), hexplorePipelines, hexploreState)
	t.Logf("%+v", rep)
}

// TestTableGrowthCrashExplorerPlanted: with bucket moves that trust what
// was logged ahead and log nothing themselves (plantMoveUnlogged), a
// batch of adds whose guesses hold leaves no violation, which shows the
// moves were logged ahead; one whose removals take the first steps
// (the last adds' moves unguessed) leaves crash images the explorer must
// find: logging ahead is a guess, never relied upon.
func TestTableGrowthCrashExplorerPlanted(t *testing.T) {
	explorePlantedGuess(t, &plantMoveUnlogged, hexploreSetup(), hexploreAdds, hexploreRemoves, hexploreState)
}

// TestFieldInlineCrashExplorerPlanted: with an inline value's bytes
// written unlogged (plantUnloggedInline), HSET of a field's inline value
// by one of as many bytes (nothing else of its entry changes) and of a new
// field in one region leaves crash images holding the new value without
// the new field; the explorer must find them.
func TestFieldInlineCrashExplorerPlanted(t *testing.T) {
	plantUnloggedInline = true
	defer func() { plantUnloggedInline = false }()
	rep := exploreServerReport(t, hexploreSetup(), [][]string{{"HSET h f1 w", "HSET h f50 a"}}, hexploreState)
	if rep.Violations == 0 {
		t.Fatalf("the unlogged inline field write was not caught: %+v", rep)
	}
	t.Logf("caught: %d violations, first: %s", rep.Violations, rep.FirstViolation)
}
