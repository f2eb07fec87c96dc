package engram

// trace.go: the Trace durability mode and the crash explorer for Go
// transactions. A pool opened with Options{Durability: Trace, Tracer: t}
// reports every store, flush and fence to t; Explore crashes the recorded
// stretch at every ordering point under the x86 persistency model, opens
// each possible image with the engine's recovery, runs Check, and then the
// caller's invariant on the recovered pool (see engram_explore in
// include/engram.h and docs/crash-consistency.md).

/*
#include <stdlib.h>
#include "engram.h"
extern int32_t engramGoCheck(void *user, engram_pool pool, char *msg, size_t cap);
static engram_check_fn engram_go_check(void) { return engramGoCheck; }
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// Tracer records a traced pool's persistent-memory events.
type Tracer struct{ h C.engram_tracer }

// NewTracer makes a tracer (not recording yet).
func NewTracer() (*Tracer, error) {
	var h C.engram_tracer
	if err := call(func() C.engram_status { return C.engram_tracer_new(&h) }); err != nil {
		return nil, err
	}
	return &Tracer{h}, nil
}

// Start starts recording.
func (t *Tracer) Start() error {
	return call(func() C.engram_status { return C.engram_tracer_start(t.h) })
}

// Stop stops recording and keeps the trace for Explore; it returns the
// number of events recorded.
func (t *Tracer) Stop() (uint64, error) {
	var n C.uint64_t
	err := call(func() C.engram_status { return C.engram_tracer_stop(t.h, &n) })
	return uint64(n), err
}

// Free releases the tracer.
func (t *Tracer) Free() error {
	return call(func() C.engram_status { return C.engram_tracer_free(t.h) })
}

// Abandon drops the pool as a crash would: nothing more is written, the
// next open recovers. For crash tests.
func (p *Pool) Abandon() error {
	err := call(func() C.engram_status { return C.engram_pool_abandon(p.h) })
	if err == nil {
		p.closed.Store(true)
	}
	return err
}

// ExploreOptions configure Explore.
type ExploreOptions struct {
	Layout           string // layout every image is opened with
	ScratchDir       string // where the image file is written (tmpfs is fastest)
	MaxImagesAtPoint uint32 // 0 = 12
	MaxViolations    uint32 // 0 = 5
}

// ExploreReport says what the explorer did.
type ExploreReport struct {
	Points, ImagesChecked, ImagesSkipped, Violations uint64
	FirstViolation                                   string
}

// Explore crashes the tracer's last recorded stretch at every ordering
// point; each recovered image must pass Check and invariant (which gets
// the recovered pool; return an error to report a violation).
func (t *Tracer) Explore(o ExploreOptions, invariant func(*Pool) error) (ExploreReport, error) {
	layout, dir := C.CString(o.Layout), C.CString(o.ScratchDir)
	defer C.free(unsafe.Pointer(layout))
	defer C.free(unsafe.Pointer(dir))
	h := cgo.NewHandle(invariant)
	defer h.Delete()
	opts := C.struct_engram_explore_options{layout: layout, scratch_dir: dir,
		max_images_per_point: C.uint32_t(o.MaxImagesAtPoint), max_violations: C.uint32_t(o.MaxViolations)}
	var rep C.struct_engram_explore_report
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	user := C.malloc(8)
	defer C.free(user)
	*(*C.uintptr_t)(user) = C.uintptr_t(h)
	if err := status(C.engram_explore(t.h, &opts, C.engram_go_check(), user, &rep)); err != nil {
		return ExploreReport{}, err
	}
	return ExploreReport{
		Points: uint64(rep.points), ImagesChecked: uint64(rep.images_checked),
		ImagesSkipped: uint64(rep.images_skipped), Violations: uint64(rep.violations),
		FirstViolation: C.GoString(&rep.first_violation[0]),
	}, nil
}

//export engramGoCheck
func engramGoCheck(user unsafe.Pointer, pool C.engram_pool, msg *C.char, capacity C.size_t) C.int32_t {
	h := cgo.Handle(*(*C.uintptr_t)(user))
	invariant := h.Value().(func(*Pool) error)
	p, err := newPool(pool, nil)
	if err == nil && invariant != nil {
		err = invariant(p)
	}
	p.closed.Store(true) // the explorer closes it
	if err == nil {
		return 0
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(msg)), int(capacity))
	n := copy(b[:len(b)-1], err.Error())
	b[n] = 0
	return 1
}
