package repotest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The README statements that drift when the code changes are checked against the code here:
// the module list, what each module requires, the test command, the install line and the Go
// version.

// depNames are the words README uses for a module's requirements (any one of them names it).
var depNames = map[string][]string{
	"github.com/go-sql-driver/mysql":      {"go-sql-driver/mysql", "go-sql-driver"},
	"github.com/prometheus/client_golang": {"client_golang", "Prometheus' client", "Prometheus client"},
	"github.com/prometheus/client_model":  {"client_model", "Prometheus' client", "Prometheus client", "client_golang"}, // client_golang requires it
	"golang.org/x/sync":                   {"x/sync"},
	"github.com/jackc/pgx/v5":             {"pgx"},
	"github.com/lib/pq":                   {"lib/pq"},
	"github.com/DATA-DOG/go-sqlmock":      {"go-sqlmock"},
	"go.opentelemetry.io/otel":            {"OpenTelemetry"},
	"go.opentelemetry.io/otel/metric":     {"OpenTelemetry"},
	"go.opentelemetry.io/otel/trace":      {"OpenTelemetry"},
	"go.opentelemetry.io/otel/sdk":        {"OpenTelemetry"},
	"go.opentelemetry.io/otel/sdk/metric": {"OpenTelemetry"},
}

// repoModules returns the repository's modules: directory ("." for the root) → go.mod.
func repoModules(t *testing.T) map[string]goMod {
	t.Helper()
	root := filepath.Join("..", "..")
	mods := map[string]goMod{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			mods[filepath.ToSlash(rel)] = readGoMod(t, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// directRequires returns the modules m requires directly (no "// indirect"), the repository's
// own left out.
func directRequires(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		}
		f := strings.Fields(line)
		if strings.HasPrefix(line, "require ") && len(f) >= 3 {
			f = f[1:]
		} else if !inBlock || len(f) < 2 {
			continue
		}
		if strings.Contains(line, "// indirect") || strings.HasPrefix(f[0], "github.com/sqlpool/sqlpool") {
			continue
		}
		out = append(out, f[0])
	}
	sort.Strings(out)
	return out
}

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var readmeModuleLine = regexp.MustCompile("^\\s*[-|*]\\s*`(github\\.com/sqlpool/sqlpool(?:/[a-z0-9]+)?)`(.*)$")

// readmeModuleLines returns README's module lines by module path: a table row or a list item
// that starts with the module path in a code span, a list item with its continuation lines.
func readmeModuleLines(t *testing.T) map[string]string {
	t.Helper()
	lines := map[string]string{}
	text := strings.Split(readREADME(t), "\n")
	for i := 0; i < len(text); i++ {
		m := readmeModuleLine.FindStringSubmatch(text[i])
		if m == nil {
			continue
		}
		line := m[2]
		if !strings.HasPrefix(strings.TrimSpace(text[i]), "|") {
			for i+1 < len(text) && strings.HasPrefix(text[i+1], "  ") && strings.TrimSpace(text[i+1]) != "" {
				i++
				line += " " + strings.TrimSpace(text[i])
			}
		}
		if _, dup := lines[m[1]]; dup {
			t.Errorf("README lists module %s twice", m[1])
		}
		lines[m[1]] = line
	}
	return lines
}

// TestREADMEModules fails unless README has one line (a table row or a list item starting with
// the module path in a code span) for every module of the repository and none for a module
// that does not exist, and unless each line of a library module (all but app) names every
// module its go.mod requires directly and no dependency it does not require.
func TestREADMEModules(t *testing.T) {
	mods := repoModules(t)
	byPath := map[string]string{}
	for dir, m := range mods {
		byPath[m.module] = dir
	}
	lines := readmeModuleLines(t)
	for path, dir := range byPath {
		line, ok := lines[path]
		if !ok {
			t.Errorf("README has no line for module %s (%s/go.mod): a table row or list item starting with `%s`", path, dir, path)
			continue
		}
		if dir == "app" {
			continue // the application's list is long; the library modules' lists are exact
		}
		req := map[string]bool{}
		for _, r := range directRequires(t, dir) {
			req[r] = true
			named := false
			for _, n := range depNames[r] {
				named = named || strings.Contains(line, n)
			}
			if !named {
				t.Errorf("README's line for %s does not name %s, which %s/go.mod requires (words for it: %q; add them to depNames if README uses another)", path, r, dir, depNames[r])
			}
		}
		for dep, names := range depNames {
			if req[dep] {
				continue
			}
			for _, n := range names {
				shared := false // a word that also names a dependency the module does require
				for other, on := range depNames {
					if req[other] && contains(on, n) {
						shared = true
					}
				}
				if !shared && containsWord(line, n) {
					t.Errorf("README's line for %s names %q (%s), which %s/go.mod does not require", path, n, dep, dir)
				}
			}
		}
	}
	for path := range lines {
		if _, ok := byPath[path]; !ok {
			t.Errorf("README lists module %s, which has no go.mod in the repository", path)
		}
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// containsWord reports whether s holds w not as part of a longer name (so "pgx" does not match
// inside "pgxpool" and "x/sync" not inside "golang.org/x/syncmap").
func containsWord(s, w string) bool {
	for i := strings.Index(s, w); i >= 0; {
		end := i + len(w)
		before := i == 0 || !isNameByte(s[i-1])
		after := end == len(s) || !isNameByte(s[end])
		if before && after {
			return true
		}
		j := strings.Index(s[i+1:], w)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '/' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

var ciGoTest = regexp.MustCompile(`(?m)^GO_TEST="go test -race (.*)\$\{SQLPOOL_CI_PKGS:-([^}]*)\}"`)

// TestREADMETestCommand fails unless README's test command is .ci/run's without -race, and
// its packages cover every module of the repository.
func TestREADMETestCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := ciGoTest.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal(`.ci/run has no line GO_TEST="go test -race … ${SQLPOOL_CI_PKGS:-…}"`)
	}
	want := "go test " + m[1] + m[2]
	found := false
	for _, line := range strings.Split(readREADME(t), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "go test ") && strings.Contains(line, "./...") {
			found = true
			if line != want {
				t.Errorf("README's test command is\n\t%s\n.ci/run runs (without -race)\n\t%s", line, want)
			}
		}
	}
	if !found {
		t.Errorf("README has no test command (a line starting with `go test` and naming ./...); .ci/run runs %q", want)
	}
	pkgs := map[string]bool{}
	for _, p := range strings.Fields(m[2]) {
		pkgs[p] = true
	}
	for dir := range repoModules(t) {
		p := "./..."
		if dir != "." {
			p = "./" + dir + "/..."
		}
		if !pkgs[p] {
			t.Errorf(".ci/run's default packages %q leave out the module in %s (%s)", m[2], dir, p)
		}
	}
}

var goGetLine = regexp.MustCompile(`go get (github\.com/sqlpool/sqlpool[^@\s]*)@(v[0-9][^\s]*)`)

// TestREADMEInstallAndGoVersion fails unless README states the Go version the library's go.mod
// asks for ("Go 1.26") and every `go get` of a repository module names a module that exists
// at the version the nested modules require of the library (the release they are tagged with).
func TestREADMEInstallAndGoVersion(t *testing.T) {
	readme := readREADME(t)
	mods := repoModules(t)
	root := mods["."]
	parts := strings.SplitN(root.goLine, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("the library's go line %q is not a version", root.goLine)
	}
	if goVer := "Go " + parts[0] + "." + parts[1]; !strings.Contains(readme, goVer) {
		t.Errorf("README does not say %q, the version the library's go.mod asks for", goVer)
	}
	release := ""
	for dir, m := range mods {
		if dir != "." {
			release = m.requires["github.com/sqlpool/sqlpool"]
		}
	}
	paths := map[string]bool{}
	for _, m := range mods {
		paths[m.module] = true
	}
	for _, m := range goGetLine.FindAllStringSubmatch(readme, -1) {
		if !paths[m[1]] {
			t.Errorf("README: go get %s@%s: no such module in the repository", m[1], m[2])
		}
		if release != "" && m[2] != release {
			t.Errorf("README: go get %s@%s: the release is %s (what the nested modules require)", m[1], m[2], release)
		}
	}
}
