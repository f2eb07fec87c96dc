package engram

// check.go: checked mode. At the outermost commit, every value the
// transaction logged or allocated is walked with reflect; every non-nil
// pointer in it (pointer fields, slice and string data) must point to the
// start of a pool object. A pointer into the Go heap would dangle after the
// next Go GC (the pool outlives the process; the Go heap does not), and an
// interior pointer would confuse the pool's GC. A violation aborts the
// transaction with ErrVolatilePointer naming the field.

/*
#include "engram.h"
*/
import "C"

import (
	"fmt"
	"reflect"
)

// hasPointers reports whether values of t hold pointers to check.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.String:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

func (tx *Tx) verify() error {
	for _, c := range tx.check {
		for i := 0; i < c.n; i++ {
			addr := c.addr + uintptr(i)*c.typ.Size()
			name := typeName(c.typ)
			if c.n > 1 {
				name = fmt.Sprintf("%s[%d]", name, i)
			}
			if err := tx.verifyValue(addr, c.typ, name); err != nil {
				return err
			}
		}
	}
	tx.check = tx.check[:0]
	return nil
}

func (tx *Tx) verifyValue(addr uintptr, t reflect.Type, path string) error {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.String:
		p := *(*uintptr)(ptr(addr))
		if t.Kind() != reflect.Pointer && *(*uintptr)(ptr(addr + 8)) == 0 {
			return nil // empty slice or string: its data pointer is not used
		}
		return tx.verifyPointer(p, path)
	case reflect.Array:
		for i := 0; i < t.Len(); i++ {
			if err := tx.verifyValue(addr+uintptr(i)*t.Elem().Size(), t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if err := tx.verifyValue(addr+f.Offset, f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (tx *Tx) verifyPointer(p uintptr, path string) error {
	if p == 0 {
		return nil
	}
	if !tx.pool.contains(p, 1) {
		return fail(ErrVolatilePointer, "%s = %#x points outside the pool (Go heap memory dangles after the next Go GC; copy it with engram.New/Make/String/Bytes)", path, p)
	}
	var id C.uint32_t
	var count C.uint64_t
	var array C.uint32_t
	if C.engram_object_info(tx.pool.h, C.uint64_t(p), &id, &count, &array) != C.ENGRAM_OK {
		return fail(ErrVolatilePointer, "%s = %#x does not point to the start of a pool object (interior pointers, e.g. s[i:] with i > 0, cannot be stored in a pool)", path, p)
	}
	return nil
}
