// hashkey_test.go: hashKey (store.go) spreads keys over a table's buckets
// as a random function would, and every byte of a key changes its hash.
package redis

import (
	"fmt"
	"testing"
)

// TestHashKeySpread hashes 100,000 keys of the shapes redis-benchmark and
// the tests use into 2^10 and 2^17 buckets (the index: the hash's low
// bits) and compares the colliding pairs with a random function's
// expectation: within 2 % (0.5 % now; the old FNV-1a: 0.6 %; a single
// final fold gave +5.7 % for "key:%012d", -3.4 % for "element:%012d").
func TestHashKeySpread(t *testing.T) {
	for _, shape := range []string{"key:%012d", "element:%012d", "f%d", "%d", "user:%d:profile:settings:theme"} {
		for _, nb := range []int{1 << 10, 1 << 17} {
			b := make([]int, nb)
			const n = 100000
			for i := 0; i < n; i++ {
				b[hashKey([]byte(fmt.Sprintf(shape, i)))&uint64(nb-1)]++
			}
			sq := 0.0
			for _, c := range b {
				sq += float64(c) * float64(c)
			}
			r := sq / (n + n*(n-1)/float64(nb))
			if r > 1.02 || r < 0.98 {
				t.Errorf("%q in %d buckets: sum of squares %.3f of a random function's", shape, nb, r)
			}
		}
	}
}

// TestHashKeyEveryByte: for keys of 0-40 bytes, changing any one byte, or
// the length by one, changes the hash's low 20 bits (a 2^20-bucket index).
func TestHashKeyEveryByte(t *testing.T) {
	const low = 1<<20 - 1
	for n := 0; n <= 40; n++ {
		k := make([]byte, n)
		for i := range k {
			k[i] = byte('a' + i)
		}
		h := hashKey(k)
		if hashKey(append(k[:n:n], 'z')) == h || (n > 0 && hashKey(k[:n-1]) == h) {
			t.Fatalf("length %d: a byte more or less keeps the hash", n)
		}
		for i := 0; i < n; i++ {
			for _, x := range []byte{1, 0x80} {
				k[i] ^= x
				if hashKey(k)&low == h&low {
					t.Errorf("length %d: byte %d ^ %#x keeps the low bits", n, i, x)
				}
				k[i] ^= x
			}
		}
	}
}
