package redis

import (
	"testing"
	"unsafe"
)

// TestZLogRanges: linkRun and moveRange cover exactly the words a change
// writes that are logged (a run's links and scores, the spans between
// them; a moved node's score to its last link), each typed run
// (batchLogRun) is as long as its range, and runs longer than
// zTypedLevels fall back to whole elements.
func TestZLogRanges(t *testing.T) {
	x := &pZNode{} // all zMaxLevel levels declared: every run below is inside it
	end := func(p unsafe.Pointer, size uintptr) uintptr { return uintptr(p) + size }
	typed := map[int][2]uintptr{ // k: a link run's and a moved node's typed size
		1: {unsafe.Sizeof(pZRun[struct{}, [0]pZLevel]{}), unsafe.Sizeof(pZRun[float64, [0]pZLevel]{})},
		2: {unsafe.Sizeof(pZRun[struct{}, [1]pZLevel]{}), unsafe.Sizeof(pZRun[float64, [1]pZLevel]{})},
		3: {unsafe.Sizeof(pZRun[struct{}, [2]pZLevel]{}), unsafe.Sizeof(pZRun[float64, [2]pZLevel]{})},
		4: {unsafe.Sizeof(pZRun[struct{}, [3]pZLevel]{}), unsafe.Sizeof(pZRun[float64, [3]pZLevel]{})},
	}
	for k := 1; k <= zTypedLevels+2; k++ {
		for lo := 0; lo+k <= 8; lo++ {
			p, size := linkRun(x, lo, lo+k)
			if p != uintptr(unsafe.Pointer(&x.L[lo])) {
				t.Fatalf("run %d..%d starts at %#x, not its first level", lo, lo+k, p)
			}
			want := end(unsafe.Pointer(&x.L[lo+k-1].FScore), 8) // through the last link's score
			if k > zTypedLevels {
				want = end(unsafe.Pointer(&x.L[lo+k-1]), unsafe.Sizeof(pZLevel{}))
			}
			if p+size != want {
				t.Fatalf("run %d..%d ends %d bytes off", lo, lo+k, int(p+size)-int(want))
			}
			if tz, ok := typed[k]; ok && tz[0] != size {
				t.Fatalf("run of %d: typed %d bytes, range %d", k, tz[0], size)
			}
		}
		p, size := moveRange(x, k)
		start, want := uintptr(unsafe.Pointer(&x.Score)), end(unsafe.Pointer(&x.L[k-1].FScore), 8)
		if k > zTypedLevels {
			start, want = uintptr(unsafe.Pointer(&x.Mem)), end(unsafe.Pointer(&x.L[k-1]), unsafe.Sizeof(pZLevel{}))
		}
		if p != start || p+size != want {
			t.Fatalf("node of level %d: range %#x+%d, want %#x..%#x", k, p, size, start, want)
		}
		if tz, ok := typed[k]; ok && tz[1] != size {
			t.Fatalf("node of level %d: typed %d bytes, range %d", k, tz[1], size)
		}
	}
}
