// Package flush holds the x86-64 instructions that make pool memory
// durable from Go: CPUID (to choose the write-back instruction as the
// engine's pmem.rs does), CLWB / CLFLUSHOPT / CLFLUSH of one cache line,
// and SFENCE. It is separate from package engram because Go assembly
// cannot live in a package that uses cgo.
package flush

// Write-back instructions, best first.
const (
	CLFLUSH    = 0
	CLFLUSHOPT = 1
	CLWB       = 2
)

// Best is the best write-back instruction this CPU offers.
var Best = detect()

func detect() int {
	_, ebx, _, _ := CPUID(7, 0)
	switch {
	case ebx&(1<<24) != 0:
		return CLWB
	case ebx&(1<<23) != 0:
		return CLFLUSHOPT
	}
	return CLFLUSH
}

// Name is the mnemonic of instruction kind.
func Name(kind int) string {
	return [...]string{"clflush", "clflushopt", "clwb"}[kind]
}

// Range writes back every cache line of [addr, addr+n) with Best.
func Range(addr, n uintptr) {
	for line := addr &^ 63; line < addr+n; line += 64 {
		FlushLine(line, Best)
	}
}

// CPUID executes CPUID with leaf and sub-leaf.
func CPUID(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// FlushLine writes back the cache line holding addr with instruction kind.
// addr must be mapped.
func FlushLine(addr uintptr, kind int)

// SFENCE orders every earlier write-back before later stores.
func SFENCE()
