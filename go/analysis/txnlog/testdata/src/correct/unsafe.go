package correct

import (
	"unsafe"

	"github.com/engram-pm/engram-go"
)

// Memory fresh in the transaction, seen through an unsafe view.
func freshView(tx *engram.Tx) (*[4]int, error) { // want freshView:"result\\(0:volatile\\|fresh\\)"
	els, err := engram.Make[int](tx, 4, 4)
	if err != nil {
		return nil, err
	}
	p := (*[4]int)(unsafe.Pointer(unsafe.SliceData(els)))
	p[0] = 1
	return p, nil
}
