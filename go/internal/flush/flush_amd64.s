// persist_amd64.s: CPUID, cache-line write-back (CLWB / CLFLUSHOPT /
// CLFLUSH) and SFENCE for package flush. Write-back instructions do not change
// memory contents; the caller passes lines inside the pool's mapping.

#include "textflag.h"

// func CPUID(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·CPUID(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func FlushLine(addr uintptr, kind int)
TEXT ·FlushLine(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ kind+8(FP), BX
	CMPQ BX, $2
	JEQ  clwb
	CMPQ BX, $1
	JEQ  clflushopt
	CLFLUSH (AX)
	RET
clwb:
	CLWB (AX)
	RET
clflushopt:
	CLFLUSHOPT (AX)
	RET

// func SFENCE()
TEXT ·SFENCE(SB), NOSPLIT, $0-0
	SFENCE
	RET
