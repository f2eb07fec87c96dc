// Tests of the txnlog analyzer on its corpus (testdata/src):
//   - bugs: seeded missed-log bugs, one per line with a diagnostic
//     expectation; every one must be reported as an unlogged store;
//   - correct: correct programs; the only diagnostics allowed are the known
//     false positives, each marked in the source and listed in
//     docs/engramvet.md;
//   - undecided: stores the analyzer cannot decide, reported as such;
//   - fixes: -fix output against fixes.go.golden, and the fixed file checked
//     again, which must be clean.
package txnlog_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/engram-pm/engram-go/analysis/txnlog"
	"golang.org/x/tools/go/analysis/analysistest"
)

// TestCorpus checks every expectation and computes the corpus figures:
// bugs caught / seeded (must be all), false positives on correct programs
// (must be exactly the marked ones), undecided reports.
func TestCorpus(t *testing.T) {
	dir := analysistest.TestData()
	results := analysistest.Run(t, dir, txnlog.Analyzer, "bugs", "correct", "undecided")

	seeded := wantLines(t, filepath.Join(dir, "src", "bugs"))
	caught := map[string]bool{}
	var fps []string
	undecided := 0
	for _, r := range results {
		for _, d := range r.Diagnostics {
			pos := r.Pass.Fset.Position(d.Pos)
			key := filepath.Base(filepath.Dir(pos.Filename)) + "/" + filepath.Base(pos.Filename) + ":" + itoa(pos.Line)
			switch {
			case strings.HasPrefix(d.Message, "cannot decide"):
				undecided++
			case r.Pass.Pkg.Path() == "bugs":
				caught[key] = true
			case r.Pass.Pkg.Path() == "correct":
				fps = append(fps, key+": "+d.Message)
			}
		}
	}
	misses := 0
	for _, k := range seeded {
		if !caught[k] {
			misses++
			t.Errorf("seeded bug not reported as an unlogged store: %s", k)
		}
	}
	marked := countMatches(t, filepath.Join(dir, "src", "correct", "correct.go"), "// Known false positive")
	if len(fps) != marked {
		t.Errorf("%d false positives on correct programs, %d marked as known", len(fps), marked)
	}
	t.Logf("corpus: %d/%d seeded bugs caught (%d missed); %d false positives on correct programs; %d cannot-decide reports",
		len(seeded)-misses, len(seeded), misses, len(fps), undecided)
	for _, fp := range fps {
		t.Logf("false positive: %s", fp)
	}
}

// TestFixes applies every suggested fix and compares with the golden file,
// then checks that the fixed program has nothing left to report.
func TestFixes(t *testing.T) {
	dir := analysistest.TestData()
	analysistest.RunWithSuggestedFixes(t, dir, txnlog.Analyzer, "fixes")

	golden, err := os.ReadFile(filepath.Join(dir, "src", "fixes", "fixes.go.golden"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	fixed := regexp.MustCompile(" *// want `[^`]*`").ReplaceAll(golden, nil)
	// The inserted logs now show in the summaries of the fixed functions.
	for _, fn := range []string{"set", "relink"} {
		fixed = regexp.MustCompile(`(?m)^(func `+fn+`\(.*\{)$`).ReplaceAll(fixed, []byte(`$1 // want `+fn+`:"logs"`))
	}
	writeFile(t, filepath.Join(tmp, "src", "fixed", "fixes.go"), fixed)
	stub, err := os.ReadFile(filepath.Join(dir, "src", "github.com", "engram-pm", "engram-go", "engram.go"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tmp, "src", "github.com", "engram-pm", "engram-go", "engram.go"), stub)
	analysistest.Run(t, tmp, txnlog.Analyzer, "fixed")
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantLines lists "pkg/file.go:line" of every line carrying a diagnostic
// expectation (a backquoted want) in the package directory.
func wantLines(t *testing.T, pkgDir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(pkgDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "// want `") {
				out = append(out, filepath.Base(pkgDir)+"/"+filepath.Base(f)+":"+itoa(i+1))
			}
		}
	}
	return out
}

func countMatches(t *testing.T, file, substr string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), substr)
}

func itoa(n int) string { return strconv.Itoa(n) }
