package repotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// libraryModules is every module the library's go.mod (the root: pool, mysqldialect, metrics,
// retry, cluster, ...) may require: go-sql-driver/mysql and its edwards25519, prometheus' client
// and what its go.mod requires, golang.org/x/sync. A library user downloads each of them; adding
// one is a decision, made here with its reason. No PostgreSQL driver: pgdialect is a module of
// its own, so that a MySQL user's module graph holds none.
var libraryModules = map[string]bool{
	"github.com/go-sql-driver/mysql":      true,
	"filippo.io/edwards25519":             true, // go-sql-driver/mysql
	"github.com/prometheus/client_golang": true,
	"github.com/prometheus/client_model":  true,
	"github.com/prometheus/common":        true, // client_golang
	"github.com/prometheus/procfs":        true, // client_golang
	"github.com/beorn7/perks":             true, // client_golang
	"github.com/cespare/xxhash/v2":        true, // client_golang
	"github.com/kylelemons/godebug":       true, // client_golang's testutil
	"github.com/munnerz/goautoneg":        true, // prometheus/common
	"golang.org/x/sys":                    true, // procfs
	"golang.org/x/sync":                   true,
	"google.golang.org/protobuf":          true, // client_model
}

// nestedModules are the repository's other modules, by directory, with the modules each may
// require besides the library's own (libraryModules and the library itself), and the reason.
var nestedModules = map[string]map[string]bool{
	// PostgreSQL users take pgx or lib/pq; pgx brings the rest.
	"pgdialect": {
		"github.com/jackc/pgx/v5":        true,
		"github.com/jackc/pgpassfile":    true, // pgx
		"github.com/jackc/pgservicefile": true, // pgx
		"github.com/jackc/puddle/v2":     true, // pgx's pgxpool (tests and benchmarks against it)
		"golang.org/x/text":              true, // pgx
		"github.com/lib/pq":              true,
	},
	// OpenTelemetry's API, and its SDK in the tests.
	"otelpool": {
		"go.opentelemetry.io/otel":            true,
		"go.opentelemetry.io/otel/metric":     true,
		"go.opentelemetry.io/otel/sdk":        true,
		"go.opentelemetry.io/otel/sdk/metric": true,
		"go.opentelemetry.io/otel/trace":      true,
		"go.opentelemetry.io/otel/log":        true, // otel/sdk
		"go.opentelemetry.io/auto/sdk":        true, // otel/trace
		"github.com/go-logr/logr":             true, // otel
		"github.com/go-logr/stdr":             true, // otel
		"github.com/google/uuid":              true, // otel/sdk
	},
	// The application module (app/) may require anything its docs list; it is not checked here.
	"app": nil,
}

// goMod is what these tests read of a go.mod file.
type goMod struct {
	module   string
	goLine   string
	requires map[string]string // module path → version
	replaces []string
}

// readGoMod parses the go.mod file in dir (relative to the repository root) as text: the tests
// import no module they check.
func readGoMod(t *testing.T, dir string) goMod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := goMod{requires: map[string]string{}}
	block := ""
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case block != "" && f[0] == ")":
			block = ""
			continue
		case len(f) == 2 && f[1] == "(":
			block = f[0]
			continue
		}
		if block != "" {
			f = append([]string{block}, f...)
		}
		switch f[0] {
		case "module":
			m.module = f[1]
		case "go":
			m.goLine = f[1]
		case "require":
			if len(f) >= 3 {
				m.requires[f[1]] = f[2]
			}
		case "replace":
			m.replaces = append(m.replaces, strings.Join(f[1:], " "))
		}
	}
	return m
}

// TestLibraryGoModRequiresOnlyWhatUsersNeed fails when the library module's go.mod requires a
// module outside libraryModules (a test-only, application or PostgreSQL dependency that leaked
// into the library, which every library user would then download) or has a replace directive.
func TestLibraryGoModRequiresOnlyWhatUsersNeed(t *testing.T) {
	m := readGoMod(t, ".")
	if m.module != "github.com/sqlpool/sqlpool" {
		t.Fatalf("../../go.mod is not the library module's: module %q", m.module)
	}
	for _, r := range m.replaces {
		t.Errorf("the library's go.mod has a replace directive, which its users do not get: replace %s", r)
	}
	for mod := range m.requires {
		if !libraryModules[mod] {
			t.Errorf("the library's go.mod requires %s: only the application module (app/go.mod) or a nested module (nestedModules) may add modules; a library dependency is added to libraryModules with its reason", mod)
		}
	}
}

// TestNestedModulesImportableAtTheirTag fails when a nested module (pgdialect/, otelpool/,
// app/) has a replace directive (its users do not get it, so it could not be imported from
// outside), requires the library or another nested module at any version but the one the
// library's require lines agree on (they are tagged together: CONTRIBUTING.md), or requires a
// module its entry in nestedModules does not allow.
func TestNestedModulesImportableAtTheirTag(t *testing.T) {
	var versions []string
	for dir, allowed := range nestedModules {
		m := readGoMod(t, dir)
		if want := "github.com/sqlpool/sqlpool/" + dir; m.module != want {
			t.Errorf("%s/go.mod: module %q, want %q", dir, m.module, want)
		}
		for _, r := range m.replaces {
			t.Errorf("%s/go.mod: replace %s: a consumer of the module does not get it; the workspace (go.work) serves local development", dir, r)
		}
		if _, ok := m.requires["github.com/sqlpool/sqlpool"]; !ok {
			t.Errorf("%s/go.mod does not require the library module github.com/sqlpool/sqlpool", dir)
		}
		for mod, v := range m.requires {
			switch {
			case mod == "github.com/sqlpool/sqlpool" || strings.HasPrefix(mod, "github.com/sqlpool/sqlpool/"):
				versions = append(versions, dir+" requires "+mod+" "+v)
				if strings.HasPrefix(v, "v0.0.0") && !strings.Contains(v, "-") {
					t.Errorf("%s/go.mod requires %s %s, a version that is never tagged", dir, mod, v)
				}
			case allowed == nil || libraryModules[mod] || allowed[mod]:
			default:
				t.Errorf("%s/go.mod requires %s: add it to nestedModules[%q] with its reason, or keep it in app/", dir, mod, dir)
			}
		}
	}
	// go.work's replaces serve each module's directory at that version.
	b, err := os.ReadFile(filepath.Join("..", "..", "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "replace "))
		if len(f) == 4 && f[2] == "=>" && strings.HasPrefix(f[0], "github.com/sqlpool/sqlpool") {
			versions = append(versions, "go.work replaces "+f[0]+" "+f[1])
		}
	}
	sort.Strings(versions)
	seen := map[string]bool{}
	for _, v := range versions {
		seen[v[strings.LastIndex(v, " ")+1:]] = true
	}
	if len(seen) > 1 {
		t.Errorf("the nested modules require the repository's modules at different versions; they are tagged together, so one version:\n%s", strings.Join(versions, "\n"))
	}
}

// TestMySQLUserGraphHasNoPostgres fails when the library module's graph (`go list -m all`
// outside the workspace, as a user's module sees it) lists a PostgreSQL driver or the
// application's dependencies.
func TestMySQLUserGraphHasNoPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-m", "all")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("GOWORK=off go list -m all: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mod := strings.Fields(line)[0]
		for _, bad := range []string{"github.com/jackc/", "github.com/lib/pq", "github.com/sqlpool/sqlpool/", "go.opentelemetry.io/"} {
			if strings.HasPrefix(mod, bad) {
				t.Errorf("the library's module graph lists %s: a MySQL user would download it", line)
			}
		}
	}
}
