package redis

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// parseIntRef is parseInt before its fast path: strconv after the checks
// of zeros and length.
func parseIntRef(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 || (len(b) > 1 && b[0] == '0') || (len(b) > 1 && b[0] == '-' && b[1] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// parseInt answers as strconv did for the forms at the fast path's edges
// (18 and 19 digits, the int64 limits, signs, zeros, non-digits) and
// for random digit strings; decimalLen is the formatted length.
func TestParseIntFastPath(t *testing.T) {
	cases := []string{"", "0", "-0", "00", "01", "-01", "+5", "+0", "-", "--1", "-+1", "1e3", " 1", "1 ", "12a", "a",
		"7", "-7", "123456", "999999999999999999", "-999999999999999999", "1000000000000000000",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"99999999999999999999", "123456789012345678901", "1/", "1:", "\x00"}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		b := []byte{}
		if r.IntN(3) == 0 {
			b = append(b, "-+"[r.IntN(2)])
		}
		for n := 1 + r.IntN(21); n > 0; n-- {
			b = append(b, "0123456789"[r.IntN(10)])
		}
		if r.IntN(20) == 0 {
			b[r.IntN(len(b))] = "x/:. "[r.IntN(5)]
		}
		cases = append(cases, string(b))
	}
	for _, c := range cases {
		n, ok := parseInt([]byte(c))
		wn, wok := parseIntRef([]byte(c))
		if n != wn || ok != wok {
			t.Fatalf("parseInt(%q) = %d, %v; strconv's: %d, %v", c, n, ok, wn, wok)
		}
	}
	for _, v := range []int64{0, 1, 9, 10, -1, -9, -10, 99, 100, 1e17, 1e18 - 1, 1e18, math.MaxInt64, math.MinInt64, math.MinInt64 + 1} {
		if got, want := decimalLen(v), len(strconv.FormatInt(v, 10)); got != want {
			t.Errorf("decimalLen(%d) = %d, want %d", v, got, want)
		}
	}
}
