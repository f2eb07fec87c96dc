// Command engramvet checks Engram transactions for stores to pool memory
// that are not undo-logged first (the txnlog analyzer).
//
// Standalone:
//
//	engramvet ./...          report
//	engramvet -fix ./...     insert the missing tx.Log calls
//
// As a vet tool:
//
//	go vet -vettool=$(which engramvet) ./...
//
// go vet runs the tool once per package with a JSON .cfg file (and asks it
// -V=full and -flags first); those invocations go to unitchecker, every
// other one to singlechecker, which loads packages itself.
package main

import (
	"os"
	"strings"

	"github.com/engram-pm/engram-go/analysis/txnlog"
	"golang.org/x/tools/go/analysis/singlechecker"
	"golang.org/x/tools/go/analysis/unitchecker"
)

func main() {
	if vetInvocation(os.Args[1:]) {
		unitchecker.Main(txnlog.Analyzer)
		return
	}
	singlechecker.Main(txnlog.Analyzer)
}

// vetInvocation reports whether the arguments are go vet's protocol: a
// single *.cfg file, or the -V=full / -flags queries.
func vetInvocation(args []string) bool {
	for _, a := range args {
		if a == "-V=full" || a == "--V=full" || a == "-flags" || a == "--flags" || strings.HasSuffix(a, ".cfg") {
			return true
		}
	}
	return false
}
