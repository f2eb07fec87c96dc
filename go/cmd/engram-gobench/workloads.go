package main

// workloads.go: go-pmem's microbenchmarks written in Go on Engram, doing
// what the Rust implementations in crates/engram-bench/src/engram_impl.rs
// do, transaction for region:
//
//   - binary-trees: every tree built in ONE Txn (New per node) and freed in
//     ONE Txn (Free per node); counts read with plain Go loads, outside
//     transactions (as the PMDK peer does).
//   - n-body: the five bodies in one pool object; every step is one Txn
//     that logs the bodies and advances them in place.
//   - sps: a pool slice with a[i] = i built before the clock starts; ONE
//     Txn of random swaps (xorshift64*), both elements logged.

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/engram-pm/engram-go"
)

type btNode struct{ Left, Right *btNode }

const btMinDepth = 4

func build(tx *engram.Tx, depth int) (*btNode, error) {
	n, err := engram.New[btNode](tx)
	if err != nil || depth == 0 {
		return n, err
	}
	if n.Left, err = build(tx, depth-1); err != nil {
		return nil, err
	}
	n.Right, err = build(tx, depth-1)
	return n, err
}

func count(n *btNode) uint64 {
	if n.Left == nil {
		return 1
	}
	return 1 + count(n.Left) + count(n.Right)
}

func freeTree(tx *engram.Tx, n *btNode) error {
	if n.Left != nil {
		if err := freeTree(tx, n.Left); err != nil {
			return err
		}
		if err := freeTree(tx, n.Right); err != nil {
			return err
		}
	}
	return tx.Free(n)
}

func oneTree(p *engram.Pool, depth int) (uint64, error) {
	var t *btNode
	if err := p.Txn(func(tx *engram.Tx) (err error) { t, err = build(tx, depth); return }); err != nil {
		return 0, err
	}
	c := count(t)
	return c, p.Txn(func(tx *engram.Tx) error { return freeTree(tx, t) })
}

func binaryTrees(p *engram.Pool, maxDepth int) (uint64, error) {
	total, err := oneTree(p, maxDepth+1)
	if err != nil {
		return 0, err
	}
	var long *btNode
	if err := p.Txn(func(tx *engram.Tx) (err error) {
		if long, err = build(tx, maxDepth); err == nil {
			err = engram.SetRoot(tx, "long_lived", long)
		}
		return
	}); err != nil {
		return 0, err
	}
	for d := btMinDepth; d <= maxDepth; d += 2 {
		for i := 0; i < 1<<(maxDepth-d+btMinDepth); i++ {
			c, err := oneTree(p, d)
			if err != nil {
				return 0, err
			}
			total += c
		}
	}
	total += count(long)
	return total, p.Txn(func(tx *engram.Tx) error {
		if err := engram.DeleteRoot(tx, "long_lived"); err != nil {
			return err
		}
		return freeTree(tx, long)
	})
}

type body struct{ X, Y, Z, VX, VY, VZ, Mass float64 }

type system struct{ B [5]body }

const (
	solarMass   = 4 * math.Pi * math.Pi
	daysPerYear = 365.24
	dt          = 0.01
)

func initialBodies() [5]body {
	mk := func(p, v [3]float64, m float64) body {
		return body{p[0], p[1], p[2], v[0] * daysPerYear, v[1] * daysPerYear, v[2] * daysPerYear, m * solarMass}
	}
	b := [5]body{
		mk([3]float64{}, [3]float64{}, 1),
		mk([3]float64{4.84143144246472090e+00, -1.16032004402742839e+00, -1.03622044471123109e-01},
			[3]float64{1.66007664274403694e-03, 7.69901118419740425e-03, -6.90460016972063023e-05}, 9.54791938424326609e-04),
		mk([3]float64{8.34336671824457987e+00, 4.12479856412430479e+00, -4.03523417114321381e-01},
			[3]float64{-2.76742510726862411e-03, 4.99852801234917238e-03, 2.30417297573763929e-05}, 2.85885980666130812e-04),
		mk([3]float64{1.28943695621391310e+01, -1.51111514016986312e+01, -2.23307578892655734e-01},
			[3]float64{2.96460137564761618e-03, 2.37847173959480950e-03, -2.96589568540237556e-05}, 4.36624404335156298e-05),
		mk([3]float64{1.53796971148509165e+01, -2.59193146099879641e+01, 1.79258772950371181e-01},
			[3]float64{2.68067772490389322e-03, 1.62824170038242295e-03, -9.51592254519715870e-05}, 5.15138902046611451e-05),
	}
	var px, py, pz float64
	for _, x := range b {
		px, py, pz = px+x.VX*x.Mass, py+x.VY*x.Mass, pz+x.VZ*x.Mass
	}
	b[0].VX, b[0].VY, b[0].VZ = -px/solarMass, -py/solarMass, -pz/solarMass
	return b
}

func advance(b *[5]body) {
	for i := range b {
		for j := i + 1; j < len(b); j++ {
			dx, dy, dz := b[i].X-b[j].X, b[i].Y-b[j].Y, b[i].Z-b[j].Z
			d2 := dx*dx + dy*dy + dz*dz
			mag := dt / (d2 * math.Sqrt(d2))
			mi, mj := b[i].Mass, b[j].Mass
			b[i].VX -= dx * mj * mag
			b[i].VY -= dy * mj * mag
			b[i].VZ -= dz * mj * mag
			b[j].VX += dx * mi * mag
			b[j].VY += dy * mi * mag
			b[j].VZ += dz * mi * mag
		}
	}
	for i := range b {
		b[i].X += dt * b[i].VX
		b[i].Y += dt * b[i].VY
		b[i].Z += dt * b[i].VZ
	}
}

func energy(b *[5]body) float64 {
	e := 0.0
	for i := range b {
		e += 0.5 * b[i].Mass * (b[i].VX*b[i].VX + b[i].VY*b[i].VY + b[i].VZ*b[i].VZ)
		for j := i + 1; j < len(b); j++ {
			dx, dy, dz := b[i].X-b[j].X, b[i].Y-b[j].Y, b[i].Z-b[j].Z
			e -= b[i].Mass * b[j].Mass / math.Sqrt(dx*dx+dy*dy+dz*dz)
		}
	}
	return e
}

func nbody(p *engram.Pool, steps int) (float64, error) {
	var s *system
	if err := p.Txn(func(tx *engram.Tx) (err error) {
		if s, err = engram.New[system](tx); err == nil {
			s.B = initialBodies()
			err = engram.SetRoot(tx, "bodies", s)
		}
		return
	}); err != nil {
		return 0, err
	}
	for i := 0; i < steps; i++ {
		if err := p.Txn(func(tx *engram.Tx) error {
			if err := tx.Log(&s.B); err != nil {
				return err
			}
			advance(&s.B)
			return nil
		}); err != nil {
			return 0, err
		}
	}
	return energy(&s.B), nil
}

type spsArray struct{ A []uint64 }

// sps returns the checksum and the time of the swapping transaction only.
func sps(p *engram.Pool, n, swaps uint64) (uint64, time.Duration, error) {
	var h *spsArray
	if err := p.Txn(func(tx *engram.Tx) (err error) {
		if h, err = engram.New[spsArray](tx); err != nil {
			return err
		}
		if h.A, err = engram.Make[uint64](tx, int(n), int(n)); err != nil {
			return err
		}
		for i := range h.A {
			h.A[i] = uint64(i)
		}
		return engram.SetRoot(tx, "array", h)
	}); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	a := h.A
	err := p.Txn(func(tx *engram.Tx) error {
		state := uint64(0x5EED5EED)
		next := func() uint64 {
			state ^= state >> 12
			state ^= state << 25
			state ^= state >> 27
			return state * 0x2545F4914F6CDD1D
		}
		for k := uint64(0); k < swaps; k++ {
			i, j := next()%n, next()%n
			if err := engram.LogSlice(tx, a[i:i+1]); err != nil {
				return err
			}
			if err := engram.LogSlice(tx, a[j:j+1]); err != nil {
				return err
			}
			a[i], a[j] = a[j], a[i]
		}
		return nil
	})
	elapsed := time.Since(start)
	var sum uint64
	for i, v := range a {
		sum += v * uint64(i+1)
	}
	return sum, elapsed, err
}

// runGo runs one workload in Go in a fresh pool; returns the time of what
// the Rust implementation times, and the checked value.
func runGo(workload string, size uint64, mode engram.Durability, dir string) (time.Duration, string, error) {
	path := filepath.Join(dir, fmt.Sprintf("engram-gobench-%s.pool", workload))
	p, err := engram.Create(path, &engram.Options{Layout: "engram_gobench", Durability: mode, InitialSize: poolBytes(workload, size)})
	if err != nil {
		return 0, "", err
	}
	defer removeAfter(p, path)
	start := time.Now()
	switch workload {
	case "binary-trees":
		c, err := binaryTrees(p, max(int(size), btMinDepth+2))
		return time.Since(start), fmt.Sprint(c), err
	case "nbody":
		e, err := nbody(p, int(size))
		return time.Since(start), fmt.Sprintf("%.9f", e), err
	default:
		s, d, err := sps(p, size, size)
		return d, fmt.Sprint(s), err
	}
}

func poolBytes(workload string, size uint64) uint64 {
	const base = 64 << 20
	switch workload {
	case "binary-trees":
		return base + 3*(uint64(1)<<(size+2))*64
	case "sps":
		return base + size*8 + size*256
	}
	return base
}
