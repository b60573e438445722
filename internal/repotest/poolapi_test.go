package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The bars package pool's API is held to: `go doc -all ./pool` stays short enough to read in
// one sitting, and pool asks for few interfaces of its users.
const (
	maxPoolDocLines      = 650
	maxPoolExportedIface = 8
)

// dialectPackages are the packages that hold one database's knowledge. Package pool must not
// import them, link them, or name their types: it reaches a database only through a
// pool.Dialect chosen by Config.Dialect or RegisterDialect.
var dialectPackages = []string{
	"github.com/sqlpool/sqlpool/txstate",
	"github.com/sqlpool/sqlpool/validate",
	"github.com/sqlpool/sqlpool/mysqldialect",
	"github.com/sqlpool/sqlpool/pgdialect",
}

func isDialectPackage(p string) bool {
	for _, d := range dialectPackages {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// runGo runs the go binary of the toolchain running the test in the repository root.
func runGo(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var exportedIfaceLine = regexp.MustCompile(`(?m)^type [A-Za-z0-9_]+ interface`)

// TestPoolDocSize fails when `go doc -all ./pool` grows past maxPoolDocLines lines or lists
// more than maxPoolExportedIface exported interfaces. Cut design narrative and mechanism from
// doc comments (docs/*.md and comments inside function bodies are the place for them) rather
// than raising the bar.
func TestPoolDocSize(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc")
	}
	out := runGo(t, "doc", "-all", "./pool")
	if n := strings.Count(out, "\n"); n > maxPoolDocLines {
		t.Errorf("go doc -all ./pool prints %d lines, more than %d: shorten doc comments in pool (defaults, zero values and what a user decides stay; narrative and mechanism go to docs/)", n, maxPoolDocLines)
	}
	if ifaces := exportedIfaceLine.FindAllString(out, -1); len(ifaces) > maxPoolExportedIface {
		t.Errorf("package pool exports %d interfaces, more than %d:\n%s", len(ifaces), maxPoolExportedIface, strings.Join(ifaces, "\n"))
	}
}

// TestPoolLinksNoDialect fails when `go list -deps ./pool` names a dialect package (or
// txstate or validate, which mysqldialect builds on).
func TestPoolLinksNoDialect(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, dep := range strings.Fields(runGo(t, "list", "-deps", "./pool")) {
		if isDialectPackage(dep) {
			t.Errorf("go list -deps ./pool includes %s: pool must reach a database only through a pool.Dialect", dep)
		}
	}
}

// TestPoolNamesNoDialectType parses package pool's non-test files and fails when one imports
// a dialect package, or when a type assertion or a type switch case names a type qualified by
// such an import.
func TestPoolNamesNoDialectType(t *testing.T) {
	if testing.Short() {
		t.Skip("parses package pool")
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "pool", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	parsed := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed++
		// dialectNames maps the names this file gives dialect packages to their paths.
		dialectNames := map[string]string{}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !isDialectPackage(p) {
				continue
			}
			t.Errorf("%s imports %s: pool must reach a database only through a pool.Dialect", fset.Position(imp.Pos()), p)
			local := path.Base(p)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			dialectNames[local] = p
		}
		// check reports a type expression naming a dialect package's type.
		check := func(what string, e ast.Expr) {
			ast.Inspect(e, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok {
					if p, ok := dialectNames[id.Name]; ok {
						t.Errorf("%s: %s names %s.%s: pool must not know a dialect's concrete types", fset.Position(sel.Pos()), what, p, sel.Sel.Name)
					}
				}
				return false
			})
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				if n.Type != nil { // nil: the x.(type) of a type switch
					check("a type assertion", n.Type)
				}
			case *ast.TypeSwitchStmt:
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						check("a type switch case", e)
					}
				}
			}
			return true
		})
	}
	if parsed == 0 {
		t.Fatal("found no non-test Go files in ../../pool")
	}
}
