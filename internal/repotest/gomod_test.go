package repotest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// libraryModules is every module the library's go.mod may require: go-sql-driver/mysql and its
// edwards25519, pgx and lib/pq (imported only by package pgdialect, never by pool: see
// TestPoolImportsNoDriver) and what pgx requires, prometheus' client and what its go.mod
// requires, golang.org/x/sync. A library
// user downloads each of them; adding one is a decision, made here with its reason.
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
	"golang.org/x/sync":                   true, // also pgx's puddle
	"github.com/jackc/pgx/v5":             true, // pgdialect
	"github.com/jackc/pgpassfile":         true, // pgx
	"github.com/jackc/pgservicefile":      true, // pgx
	"github.com/jackc/puddle/v2":          true, // pgx's pgxpool (tests and benchmarks against it)
	"golang.org/x/text":                   true, // pgx
	"github.com/lib/pq":                   true, // pgdialect
	"google.golang.org/protobuf":          true, // client_model
}

// TestLibraryGoModRequiresOnlyWhatUsersNeed fails when the library module's go.mod requires a
// module outside libraryModules (a test-only or application dependency that leaked into the
// library, which every library user would then download).
func TestLibraryGoModRequiresOnlyWhatUsersNeed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "module github.com/sqlpool/sqlpool\n") {
		t.Fatalf("../../go.mod is not the library module's")
	}
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		var mod string
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case inBlock && line != "" && !strings.HasPrefix(line, "//"):
			mod = strings.Fields(line)[0]
		case strings.HasPrefix(line, "require "):
			mod = strings.Fields(line)[1]
		case strings.HasPrefix(line, "replace "):
			t.Errorf("the library's go.mod has a replace directive, which its users do not get: %s", line)
		}
		if mod != "" && !libraryModules[mod] {
			t.Errorf("the library's go.mod requires %s: only the application module (app/go.mod) may add modules; a library dependency is added to libraryModules with its reason", mod)
		}
	}
}
