package engram

import "unsafe"

// ptr2 is the address of an element, as a uintptr.
func ptr2[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }
