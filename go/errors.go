package engram

// errors.go: the engine's stable error codes (include/engram.h, enum
// engram_code) as Go sentinel errors, usable with errors.Is, plus the errors
// of the Go front end itself.

/*
#include "engram.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package matches exactly one
// of them with errors.Is (front-end errors may also wrap a more specific one).
var (
	ErrIO                 = errors.New("engram: I/O error")
	ErrNotAPool           = errors.New("engram: not an Engram pool")
	ErrTruncated          = errors.New("engram: truncated pool")
	ErrBadChecksum        = errors.New("engram: pool header checksum mismatch")
	ErrUnsupportedVersion = errors.New("engram: unsupported pool format version")
	ErrWrongLayout        = errors.New("engram: wrong pool layout")
	ErrLayoutMismatch     = errors.New("engram: type layout differs from the pool's")
	ErrCorrupt            = errors.New("engram: corrupt pool")
	ErrPoolFull           = errors.New("engram: pool is full")
	ErrInvalidArgument    = errors.New("engram: invalid argument")
	ErrBadPointer         = errors.New("engram: not a valid pool address")
	ErrAlreadyOpen        = errors.New("engram: pool is already open")
	ErrExists             = errors.New("engram: file exists")
	ErrRootType           = errors.New("engram: root holds another type")
	ErrTableFull          = errors.New("engram: pool table is full")
	ErrLockTimeout        = errors.New("engram: lock wait timed out")
	ErrAborted            = errors.New("engram: region aborted")
	ErrBusy               = errors.New("engram: pool is busy")
	ErrReadOnly           = errors.New("engram: pool is read-only")
	ErrTxTooLarge         = errors.New("engram: region needs more undo log than a region may hold")
	ErrNestedTransaction  = errors.New("engram: call not allowed inside a region")
	ErrDoubleFree         = errors.New("engram: object freed twice")
	ErrOutOfBounds        = errors.New("engram: index or range out of bounds")
	ErrPoolTooSmall       = errors.New("engram: pool size below the minimum")
	ErrTxnInAtomically    = errors.New("engram: region opened inside an STM transaction")
	ErrBadPointerField    = errors.New("engram: pointer field names no live pool object")
	ErrBadFields          = errors.New("engram: pool holds pointer fields naming no live object")
	ErrUnknownFunction    = errors.New("engram: lazy thunk names an unregistered function")
	ErrCrossPool          = errors.New("engram: STM transaction used a variable of another pool")
	ErrStmClockExhausted  = errors.New("engram: STM version clock reached its limit")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("engram: pool is closed")
	// ErrTxEnded: a Tx was used after its region ended (or on another goroutine).
	ErrTxEnded  = errors.New("engram: transaction used after its region ended")
	ErrInternal = errors.New("engram: internal error")
	// ErrUnsupportedType: a Go type the pool cannot hold (map, chan, func,
	// interface, unsafe.Pointer); the message names the field.
	ErrUnsupportedType = errors.New("engram: type cannot live in a pool")
	// ErrNoRoot: no root of that name.
	ErrNoRoot = errors.New("engram: no such root")
	// ErrVolatilePointer: checked mode found a pointer field that does not
	// point to the start of a pool object (a Go-heap pointer would dangle
	// after the next Go GC); the message names the field.
	ErrVolatilePointer = errors.New("engram: pointer field does not point to a pool object")
)

var byCode = map[C.engram_status]error{
	C.ENGRAM_ERR_IO:                  ErrIO,
	C.ENGRAM_ERR_NOT_A_POOL:          ErrNotAPool,
	C.ENGRAM_ERR_TRUNCATED:           ErrTruncated,
	C.ENGRAM_ERR_BAD_CHECKSUM:        ErrBadChecksum,
	C.ENGRAM_ERR_UNSUPPORTED_VERSION: ErrUnsupportedVersion,
	C.ENGRAM_ERR_WRONG_LAYOUT:        ErrWrongLayout,
	C.ENGRAM_ERR_LAYOUT_MISMATCH:     ErrLayoutMismatch,
	C.ENGRAM_ERR_CORRUPT:             ErrCorrupt,
	C.ENGRAM_ERR_POOL_FULL:           ErrPoolFull,
	C.ENGRAM_ERR_INVALID_ARGUMENT:    ErrInvalidArgument,
	C.ENGRAM_ERR_BAD_POINTER:         ErrBadPointer,
	C.ENGRAM_ERR_ALREADY_OPEN:        ErrAlreadyOpen,
	C.ENGRAM_ERR_EXISTS:              ErrExists,
	C.ENGRAM_ERR_ROOT_TYPE:           ErrRootType,
	C.ENGRAM_ERR_TABLE_FULL:          ErrTableFull,
	C.ENGRAM_ERR_LOCK_TIMEOUT:        ErrLockTimeout,
	C.ENGRAM_ERR_ABORTED:             ErrAborted,
	C.ENGRAM_ERR_BUSY:                ErrBusy,
	C.ENGRAM_ERR_READ_ONLY:           ErrReadOnly,
	C.ENGRAM_ERR_TX_TOO_LARGE:        ErrTxTooLarge,
	C.ENGRAM_ERR_NESTED_TRANSACTION:  ErrNestedTransaction,
	C.ENGRAM_ERR_DOUBLE_FREE:         ErrDoubleFree,
	C.ENGRAM_ERR_OUT_OF_BOUNDS:       ErrOutOfBounds,
	C.ENGRAM_ERR_POOL_TOO_SMALL:      ErrPoolTooSmall,
	C.ENGRAM_ERR_TXN_IN_ATOMICALLY:   ErrTxnInAtomically,
	C.ENGRAM_ERR_BAD_POINTER_FIELD:   ErrBadPointerField,
	C.ENGRAM_ERR_BAD_FIELDS:          ErrBadFields,
	C.ENGRAM_ERR_UNKNOWN_FUNCTION:    ErrUnknownFunction,
	C.ENGRAM_ERR_CROSS_POOL:          ErrCrossPool,
	C.ENGRAM_ERR_STM_CLOCK_EXHAUSTED: ErrStmClockExhausted,
	C.ENGRAM_ERR_CLOSED:              ErrClosed,
	C.ENGRAM_ERR_REGION_ENDED:        ErrTxEnded,
	C.ENGRAM_ERR_INTERNAL:            ErrInternal,
}

// Error is an error reported by the engine: its stable code and message.
type Error struct {
	Code    int    // the engine's code (enum engram_code)
	Message string // engram_last_error()
	kind    error
}

func (e *Error) Error() string { return "engram: " + e.Message }
func (e *Error) Unwrap() error { return e.kind }

// status turns a C status into a Go error (nil for ENGRAM_OK). It must run
// on the thread that made the call (the message is thread-local): callers
// hold the OS thread or call it right after the cgo call, which is on the
// same thread.
func status(s C.engram_status) error {
	if s == C.ENGRAM_OK {
		return nil
	}
	kind, ok := byCode[s]
	if !ok {
		kind = ErrInternal
	}
	return &Error{Code: int(s), Message: C.GoString(C.engram_last_error()), kind: kind}
}

// fail makes a front-end error of kind with a message.
func fail(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
