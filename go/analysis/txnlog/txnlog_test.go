package txnlog_test

import (
	"testing"

	"github.com/engram-pm/engram-go/analysis/txnlog"
	"golang.org/x/tools/go/analysis/analysistest"
)

func TestBugs(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), txnlog.Analyzer, "bugs")
}
