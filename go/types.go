package engram

// types.go: Go types described to the engine's persistent type table.
//
// A Go type's layout comes from reflect: its size and alignment, the
// offsets of every pool pointer in it (pointer fields, the data pointer of
// slice and string headers, inside arrays and nested structs), and a
// signature (field names, types and offsets) hashed into the layout hash,
// so a changed struct is a different layout. Types the pool cannot hold are
// refused with ErrUnsupportedType naming the field.
//
// So that a changed struct can be reported by field, each type's signature
// is also kept in the pool, in a list under the root "engram-go.types"
// (written in the transaction that first registers the type); on
// ErrLayoutMismatch the stored and the current signatures are compared.

/*
#include <stdlib.h>
#include "engram.h"
*/
import "C"

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// layout is what the engine is told about a Go type.
type layout struct {
	name   string
	fields []string // "Name type@offset", top-level fields (the signature)
	size   uintptr
	align  uintptr
	ptrs   []uint32
}

func (l *layout) signature() string { return strings.Join(l.fields, ";") }

// typeName is the name recorded in the pool: package path and name for a
// named type (shortened to the package name if too long), else t.String().
func typeName(t reflect.Type) string {
	if t.Name() != "" && t.PkgPath() != "" {
		if full := t.PkgPath() + "." + t.Name(); len(full) <= 96 {
			return full
		}
	}
	return t.String()
}

func describe(t reflect.Type) (*layout, error) {
	l := &layout{name: typeName(t), size: t.Size(), align: uintptr(t.Align())}
	if err := l.walk(t, 0, typeName(t), map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	if t.Kind() == reflect.Struct {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			l.fields = append(l.fields, fmt.Sprintf("%s %s@%d", f.Name, f.Type.String(), f.Offset))
		}
	} else {
		l.fields = []string{t.String()}
	}
	return l, nil
}

// walk records the pool pointers of a value of type t at offset off.
func (l *layout) walk(t reflect.Type, off uintptr, path string, seen map[reflect.Type]bool) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Pointer, reflect.Slice:
		l.ptrs = append(l.ptrs, uint32(off))
		return supported(t.Elem(), path+"[elem]", seen)
	case reflect.String:
		l.ptrs = append(l.ptrs, uint32(off))
		return nil
	case reflect.Array:
		for i := 0; i < t.Len(); i++ {
			if err := l.walk(t.Elem(), off+uintptr(i)*t.Elem().Size(), fmt.Sprintf("%s[%d]", path, i), seen); err != nil {
				return err
			}
		}
		return nil
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if err := l.walk(f.Type, off+f.Offset, path+"."+f.Name, seen); err != nil {
				return err
			}
		}
		return nil
	default: // Map, Chan, Func, Interface, UnsafePointer
		return fail(ErrUnsupportedType, "%s has type %s (a %s cannot live in a pool: it would point into the Go heap)", path, t, t.Kind())
	}
}

// supported checks that values of t could live in a pool (the target of a
// pointer or slice), without recording offsets.
func supported(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	var l layout
	return l.walk(t, 0, path, seen)
}

// goTypeEntry is one element of the signature list under "engram-go.types".
type goTypeEntry struct {
	Next *goTypeEntry
	Name string
	Sig  string
}

const typesRoot = "engram-go.types"

// typeID returns the pool's id for t, registering it on first use.
func (p *Pool) typeID(t reflect.Type) (uint32, error) {
	p.mu.Lock()
	id, ok := p.types[t]
	p.mu.Unlock()
	if ok {
		return id, nil
	}
	l, err := describe(t)
	if err != nil {
		return 0, err
	}
	id, err = p.register(l)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.types[t] = id
	p.mu.Unlock()
	return id, nil
}

// register tells the engine about l; on a layout mismatch it names the field.
func (p *Pool) register(l *layout) (uint32, error) {
	cname, csig := C.CString(l.name), C.CString(l.signature())
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(csig))
	var cptrs *C.uint32_t
	if len(l.ptrs) > 0 {
		cptrs = (*C.uint32_t)(C.malloc(C.size_t(4 * len(l.ptrs))))
		defer C.free(unsafe.Pointer(cptrs))
		copy(unsafe.Slice((*uint32)(unsafe.Pointer(cptrs)), len(l.ptrs)), l.ptrs)
	}
	d := C.struct_engram_type_desc{name: cname, size: C.uint64_t(l.size), align: C.uint32_t(l.align),
		nptrs: C.uint32_t(len(l.ptrs)), ptr_offsets: cptrs, signature: csig}
	var id C.uint32_t
	err := call(func() C.engram_status { return C.engram_type_register(p.h, &d, &id) })
	if err != nil {
		if isCode(err, C.ENGRAM_ERR_LAYOUT_MISMATCH) {
			return 0, fmt.Errorf("%w: %s", err, p.explainMismatch(l))
		}
		return 0, err
	}
	return uint32(id), nil
}

func isCode(err error, code C.engram_status) bool {
	e, ok := err.(*Error)
	return ok && e.Code == int(code)
}

// recordSignature keeps l's signature in the pool (inside tx) unless it is
// there already.
func (tx *Tx) recordSignature(t reflect.Type) error {
	l, err := describe(t)
	if err != nil || l.name == typeName(reflect.TypeFor[goTypeEntry]()) {
		return err
	}
	head, err := rootIn[goTypeEntry](tx, typesRoot)
	if err != nil && err != ErrNoRoot {
		return err
	}
	for e := head; e != nil; e = e.Next {
		if e.Name == l.name {
			return nil
		}
	}
	e, err := New[goTypeEntry](tx)
	if err != nil {
		return err
	}
	if e.Name, err = String(tx, l.name); err != nil {
		return err
	}
	if e.Sig, err = String(tx, l.signature()); err != nil {
		return err
	}
	e.Next = head
	return SetRoot(tx, typesRoot, e)
}

// explainMismatch names the first field that differs from the pool's record.
func (p *Pool) explainMismatch(l *layout) string {
	var old string
	_ = p.Txn(func(tx *Tx) error {
		head, err := rootIn[goTypeEntry](tx, typesRoot)
		for e := head; err == nil && e != nil; e = e.Next {
			if e.Name == l.name {
				old = strings.Clone(e.Sig)
			}
		}
		return nil
	})
	if old == "" {
		return fmt.Sprintf("type %s: the pool's layout was not written by this Go front end", l.name)
	}
	was := strings.Split(old, ";")
	for i, f := range l.fields {
		if i >= len(was) {
			return fmt.Sprintf("type %s: field %q was added", l.name, f)
		}
		if was[i] != f {
			return fmt.Sprintf("type %s: field %q is now %q", l.name, was[i], f)
		}
	}
	if len(was) > len(l.fields) {
		return fmt.Sprintf("type %s: field %q was removed", l.name, was[len(l.fields)])
	}
	return fmt.Sprintf("type %s: same fields, different layout", l.name)
}
