package repotest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The documentation's budget (issue 38's bar): README ≤ 15 KB, docs/benchmarks.md ≤ 15 KB, the
// user pages (docs/*.md but the index, docs/README.md) ≤ 120 KB in all,
// with no issue numbers, "before this fix" history or test names in their prose. Design notes
// and measurement logs go to docs/design/, which is not counted.
const (
	maxREADMEBytes     = 15 << 10
	maxBenchmarksBytes = 15 << 10
	maxUserPagesBytes  = 120_000
	// enforceUserPages turns the user pages' total and prose checks from a log into a failure;
	// it is on once the user pages' final text is written.
	enforceUserPages = true
)

var (
	issueRef   = regexp.MustCompile(`(?i)\bissue\s+#?\d+|\bbefore (this|the) fix\b`)
	testInText = regexp.MustCompile(`\b(Test|Benchmark|Fuzz)[A-Z]\w+`)
)

// TestDocBudget fails when README or docs/benchmarks.md is over its size, and reports (fails,
// with enforceUserPages) the user pages' total size and every issue reference, fix history or
// test name in their text.
func TestDocBudget(t *testing.T) {
	root := filepath.Join("..", "..")
	size := func(p string) int {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return int(fi.Size())
	}
	if n := size("README.md"); n > maxREADMEBytes {
		t.Errorf("README.md is %d bytes, over %d: move detail to docs/", n, maxREADMEBytes)
	}
	if n := size("docs/benchmarks.md"); n > maxBenchmarksBytes {
		t.Errorf("docs/benchmarks.md is %d bytes, over %d: measurement logs go to docs/design/", n, maxBenchmarksBytes)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	report := t.Logf
	if enforceUserPages {
		report = t.Errorf
	}
	total := 0
	var sizes []string
	for _, p := range pages {
		name := filepath.Base(p)
		if name == "README.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		sizes = append(sizes, name+" "+itoa(len(b)))
		inCode := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inCode = !inCode
			}
			for _, m := range issueRef.FindAllString(line, -1) {
				report("docs/%s:%d: %q: a user page says what is, not its history", name, i+1, m)
			}
			if inCode {
				continue // a test in an example is code, not a test of ours named as prose
			}
			for _, m := range testInText.FindAllString(line, -1) {
				report("docs/%s:%d: %s: a test name in a user page (the design note or the report is its place)", name, i+1, m)
			}
		}
	}
	if total > maxUserPagesBytes {
		report("the user pages hold %d bytes, over %d (%s)", total, maxUserPagesBytes, strings.Join(sizes, ", "))
	}
}
