package repotest

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// TestDocsNameWhatExists fails when a page of the repository's documentation (README.md,
// CONTRIBUTING.md, docs/**.md; not CHANGELOG.md, which records names that are gone on purpose)
// names, in an inline code span, a file, a test or a Go identifier that does not exist:
//
//   - a path (`pool/acquire.go`, `internal/sqlstate`, `scripts/galera`) must exist under the
//     repository root or app/ (the docs write `zipkin/…` for app/zipkin/…); a bare file name
//     (`acquire.go`) must be the name of some file in the repository;
//   - a test, benchmark, fuzz target or example (`TestNoConnectionStranded`) must be declared in
//     some _test.go file;
//   - a Go identifier qualified by one of the repository's package names (`pool.Config`,
//     `txstate.Tracker`) must be declared in that package (a top-level name, a method or a
//     field); any other exported identifier (`Stats`, `conn.ResetSession`, `p.OpenDB()`) and any
//     unexported call (`acquire()`) must be declared in the repository or in the standard library
//     and dependency packages the docs talk about (externalPackages).
//
// Words in code spans that are not code (SQL, environment variables, flags, metric names) are not
// checked. A failure names the page, the line and the span.
func TestDocsNameWhatExists(t *testing.T) {
	if testing.Short() {
		t.Skip("parses the whole repository")
	}
	root := filepath.Join("..", "..")
	idx := indexRepo(t, root)
	idx.addExternal(t, root)
	var bad []string
	for _, page := range docPages(t, root) {
		for _, ref := range codeSpans(t, filepath.Join(root, page)) {
			why := idx.check(ref.text)
			if why == "" && strictPages[page] {
				why = idx.checkBare(ref.text)
			}
			if why != "" {
				bad = append(bad, page+":"+itoa(ref.line)+": `"+ref.text+"`: "+why)
			}
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestArchitectureBorrowPath fails unless ARCHITECTURE.md describes the borrow path of
// p.OpenDB() under a heading that contains "borrow path" as a numbered list of at most 10 steps,
// each naming (in a code span) at least one function or method declared in package pool.
func TestArchitectureBorrowPath(t *testing.T) {
	if testing.Short() {
		t.Skip("parses package pool")
	}
	root := filepath.Join("..", "..")
	idx := indexRepo(t, root)
	f, err := os.Open(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, found, steps := false, false, 0
	numbered := regexp.MustCompile(`^\d+\.\s`)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			if in {
				break
			}
			in = strings.Contains(strings.ToLower(line), "borrow path")
			found = found || in
			continue
		}
		if !in || !numbered.MatchString(line) {
			continue
		}
		steps++
		named := false
		for _, s := range spansOf(line) {
			name := strings.TrimSuffix(strings.TrimPrefix(s, "*"), "()")
			if i := strings.LastIndex(name, "."); i >= 0 {
				name = name[i+1:]
			}
			if idx.funcs["pool"][name] {
				named = true
			}
		}
		if !named {
			t.Errorf("ARCHITECTURE.md borrow path step %d names no function of package pool in a code span: %s", steps, line)
		}
	}
	if !found {
		t.Fatal(`ARCHITECTURE.md has no heading containing "borrow path"`)
	}
	if steps == 0 || steps > 10 {
		t.Errorf("ARCHITECTURE.md describes the borrow path in %d numbered steps, want 1 to 10", steps)
	}
}

// TestDocRefCheck shows which code spans the check accepts and which it refuses, on this
// repository's own names.
func TestDocRefCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("parses the whole repository")
	}
	idx := indexRepo(t, filepath.Join("..", ".."))
	for ref, ok := range map[string]bool{
		"pool/config.go":                 true,
		"pool/no_such_file.go":           false,
		"internal/mysqltest.Proxy":       true,
		"internal/mysqltest.NoSuchProxy": false,
		"config.go":                      true,
		"no_such_file.go":                false,
		"TestDocRefCheck":                true,
		"TestNoSuchTest":                 false,
		"pool.New":                       true,
		"pool.NoSuchThing":               false,
		"pool.Config":                    true,
		"p.OpenDB()":                     true,
		"p.NoSuchMethod()":               false,
		"indexRepo()":                    true,
		"noSuchFunction()":               false,
		"LAST_INSERT_ID()":               true, // SQL: not checked
		"zipkin/server":                  true, // app/zipkin/server
		"zipkin/nosuchpackage":           false,
		"github.com/jackc/pgx/v5":        true, // outside the repository: not checked
		"SELECT 1":                       true,
		"../shared/reference/zipkin.md":  false,
	} {
		if why := idx.check(ref); (why == "") != ok {
			t.Errorf("check(%q) = %q, want accepted %v", ref, why, ok)
		}
	}
}

// repoIndex is what exists: files, test functions and declared Go names.
type repoIndex struct {
	root      string
	basenames map[string]bool
	tests     map[string]bool
	// names maps a package name (the last element of its directory) to its declared names:
	// top-level declarations, methods, struct fields and interface methods.
	names map[string]map[string]bool
	// funcs maps a package name to its functions and methods.
	funcs map[string]map[string]bool
	// all is every declared name in the repository and in externalPackages.
	all map[string]bool
}

// externalPackages are the packages outside the repository whose names the docs may use
// unqualified or through a variable (`db.SetMaxIdleConns`, `ResetSession`).
var externalPackages = []string{
	"context", "database/sql", "database/sql/driver", "errors", "io", "log/slog", "net", "net/http",
	"os", "runtime", "sync", "sync/atomic", "testing", "time", "fmt", "strings",
	"github.com/go-sql-driver/mysql",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/prometheus/client_golang/prometheus/promhttp",
	"github.com/jackc/pgx/v5", "github.com/jackc/pgx/v5/pgconn", "github.com/jackc/pgx/v5/stdlib",
	"github.com/jackc/pgx/v5/pgxpool", "github.com/jackc/puddle/v2", "github.com/lib/pq",
	"golang.org/x/sync/semaphore",
	"go.opentelemetry.io/otel/trace", "go.opentelemetry.io/otel/metric",
	"github.com/jmoiron/sqlx", "gorm.io/gorm", "github.com/DATA-DOG/go-sqlmock",
	"github.com/openzipkin/zipkin-go", "github.com/twmb/franz-go/pkg/kgo",
	"github.com/rabbitmq/amqp091-go", "github.com/chromedp/chromedp",
	"go.opentelemetry.io/otel/sdk/metric", "go.opentelemetry.io/otel/sdk/trace",
	"go.opentelemetry.io/proto/otlp/collector/trace/v1", "go.opentelemetry.io/proto/otlp/trace/v1",
	"github.com/openzipkin/zipkin-go/proto/zipkin_proto3",
}

func indexRepo(t *testing.T, root string) *repoIndex {
	t.Helper()
	idx := &repoIndex{
		root:      root,
		basenames: map[string]bool{},
		tests:     map[string]bool{},
		names:     map[string]map[string]bool{},
		funcs:     map[string]map[string]bool{},
		all:       map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		idx.basenames[name] = true
		if strings.HasSuffix(name, ".js") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range jsFunc.FindAllStringSubmatch(string(b), -1) {
				idx.all[m[1]] = true // the viewer's `el()`
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // a file that does not parse is go vet's business
		}
		pkg := filepath.Base(filepath.Dir(path))
		idx.declare(pkg, f, strings.HasSuffix(name, "_test.go"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func (idx *repoIndex) declare(pkg string, f *ast.File, test bool) {
	if idx.names[pkg] == nil {
		idx.names[pkg], idx.funcs[pkg] = map[string]bool{}, map[string]bool{}
	}
	add := func(n string) { idx.names[pkg][n], idx.all[n] = true, true }
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			add(d.Name.Name)
			idx.funcs[pkg][d.Name.Name] = true
			if test && d.Recv == nil {
				idx.tests[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					add(s.Name.Name)
					var fields *ast.FieldList
					switch ty := s.Type.(type) {
					case *ast.StructType:
						fields = ty.Fields
					case *ast.InterfaceType:
						fields = ty.Methods
					}
					if fields != nil {
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								add(n.Name)
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						add(n.Name)
					}
				}
			}
		}
	}
}

// addExternal declares the names of externalPackages that the module cache or GOROOT has; a
// package that cannot be found is skipped (its names then fail as unknown, which says what to
// add).
func (idx *repoIndex) addExternal(t *testing.T, root string) {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	args := append([]string{"list", "-e", "-f", "{{.Dir}}"}, externalPackages...)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = filepath.Join(root, "app") // the application module requires most of them
	out, err := cmd.Output()
	if err != nil {
		t.Logf("go list of the external packages: %v (their names are not known)", err)
	}
	fset := token.NewFileSet()
	for _, dir := range strings.Fields(string(out)) {
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				idx.basenames[e.Name()] = true // go-sql-driver's connection.go
			}
		}
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				idx.declare("ext:"+p.Name, f, false)
			}
		}
	}
}

var (
	testName = regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)[A-Z_]\w*$`)
	fileName = regexp.MustCompile(`^[\w.-]+\.(go|md|sh|json|ya?ml|sql|proto|html|js|css|tsv|png)$`)
	pathLike = regexp.MustCompile(`^[\w.-]+(/[\w.-]+)+/?$`)
	goRef    = regexp.MustCompile(`^[*&]?([A-Za-z_]\w*)(\.[A-Za-z_]\w*)*(\([^()]*\))?$`)
	jsFunc   = regexp.MustCompile(`function\s+(\w+)\s*\(`)
)

var builtins = map[string]bool{"len": true, "cap": true, "make": true, "new": true, "close": true,
	"append": true, "copy": true, "delete": true, "panic": true, "recover": true, "min": true, "max": true,
	"clear": true, "print": true, "println": true}

// check returns "" when ref names something that exists or is not a name this test checks, and
// why not otherwise.
func (idx *repoIndex) check(ref string) string {
	ref = strings.TrimSpace(ref)
	switch {
	case ref == "" || strings.ContainsAny(ref, " \t=,:'\"<>{}[]|#@$%!?+") || strings.Contains(ref, "..."):
		return ""
	case testName.MatchString(ref):
		if !idx.tests[ref] {
			return "no test, benchmark, fuzz target or example of that name"
		}
		return ""
	case strings.Contains(ref, "/"):
		path, ident := ref, ""
		if i := strings.LastIndexByte(ref, '.'); i > strings.LastIndexByte(ref, '/') && isExported(ref[i+1:]) {
			path, ident = ref[:i], ref[i+1:] // internal/mysqltest.Proxy
		}
		if !pathLike.MatchString(path) || strings.Contains(ref, "://") {
			return ""
		}
		if strings.HasPrefix(path, "../") {
			return "a path outside the repository: a reader of the repository does not have it"
		}
		top := strings.SplitN(path, "/", 2)[0]
		if !idx.topLevel(top) {
			return "" // a module path, an import path outside the repository, an HTTP route
		}
		for _, base := range []string{idx.root, filepath.Join(idx.root, "app")} {
			if _, err := os.Stat(filepath.Join(base, filepath.FromSlash(strings.TrimSuffix(path, "/")))); err == nil {
				if ident != "" && !idx.names[filepath.Base(path)][ident] {
					return "package " + path + " declares no " + ident
				}
				return ""
			}
		}
		return "no such file or directory in the repository"
	case fileName.MatchString(ref):
		if (strings.HasSuffix(ref, ".go") || strings.HasSuffix(ref, ".sh")) && !idx.basenames[ref] {
			return "no file of that name in the repository (or in the dependencies' packages)"
		}
		return ""
	}
	m := goRef.FindStringSubmatch(ref)
	if m == nil {
		return ""
	}
	args := m[3]
	name := strings.TrimLeft(ref, "*&")
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = name[:i]
	}
	parts := strings.Split(name, ".")
	last := parts[len(parts)-1]
	if strings.Contains(last, "_") || strings.ToUpper(last) == last {
		return "" // SQL (LAST_INSERT_ID(), pg_backend_pid()), constants of other systems
	}
	switch len(parts) {
	case 1:
		// An unqualified name is checked when written as a call with no arguments: `acquire()`,
		// `Stats()`. Bare words are too often other systems' names (Zipkin's, HikariCP's).
		if args != "()" || builtins[last] || idx.all[last] {
			return ""
		}
		return "nothing in the repository or its documented dependencies declares " + last
	case 2:
		if pkg := parts[0]; idx.isRepoPackage(pkg) && (isExported(last) || args != "") {
			if !idx.names[pkg][last] {
				return "package " + pkg + " declares no " + last
			}
			return ""
		}
		if !isExported(last) || idx.all[last] {
			return ""
		}
		return "nothing in the repository or its documented dependencies declares " + last
	}
	return ""
}

// strictPages describe the code itself: there a bare exported name (`Tracker`, `SessionCaps`)
// must be declared too. Elsewhere bare words are too often other systems' names (Zipkin's
// `DependencyLinker`, HikariCP's `TimeWindowMax`).
var strictPages = map[string]bool{"ARCHITECTURE.md": true, "CONTRIBUTING.md": true}

var bareExported = regexp.MustCompile(`^\*?[A-Z][a-z0-9]+[A-Z]?\w*$`)

// checkBare is check for a bare exported Go name on a strict page.
func (idx *repoIndex) checkBare(ref string) string {
	ref = strings.TrimSpace(ref)
	if !bareExported.MatchString(ref) || strings.Contains(ref, "_") {
		return ""
	}
	name := strings.TrimPrefix(ref, "*")
	if idx.all[name] {
		return ""
	}
	return "nothing in the repository or its documented dependencies declares " + name
}

// isRepoPackage reports whether pkg is one of the repository's packages (not only an external
// package of the same name).
func (idx *repoIndex) isRepoPackage(pkg string) bool {
	_, ok := idx.funcs[pkg]
	return ok
}

func (idx *repoIndex) topLevel(name string) bool {
	for _, base := range []string{idx.root, filepath.Join(idx.root, "app")} {
		if fi, err := os.Stat(filepath.Join(base, name)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

func isExported(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// docPages lists the documentation pages the check reads, relative to root.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages[2:])
	return pages
}

type span struct {
	line int
	text string
}

// codeSpans returns the inline code spans of a Markdown page outside fenced code blocks.
func codeSpans(t *testing.T, path string) []span {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []span
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, s := range spansOf(line) {
			out = append(out, span{i + 1, s})
		}
	}
	return out
}

// spansOf returns the single-backtick code spans of one line.
func spansOf(line string) []string {
	var out []string
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			return out
		}
		if strings.HasPrefix(line[i:], "``") { // a double-backtick span: skip it whole
			j := strings.Index(line[i+2:], "``")
			if j < 0 {
				return out
			}
			line = line[i+2+j+2:]
			continue
		}
		j := strings.IndexByte(line[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, line[i+1:i+1+j])
		line = line[i+1+j+1:]
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
