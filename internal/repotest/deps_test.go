package repotest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// driverPackages are the database drivers' import path prefixes: package pool must link none of
// them, so that a PostgreSQL program does not carry MySQL's driver and the reverse.
var driverPackages = []string{
	"github.com/go-sql-driver/mysql",
	"github.com/jackc/pgx",
	"github.com/lib/pq",
}

// TestPoolImportsNoDriver fails when `go list -deps` of package pool (or of validate and
// txstate, which mysqldialect builds on) names a database driver. TestPoolLinksNoDialect
// (poolapi_test.go) keeps those and the dialect packages out of pool's own dependencies.
func TestPoolImportsNoDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, pkg := range []string{"./pool", "./validate", "./txstate", "./replica"} {
		cmd := exec.Command(goBin, "list", "-deps", pkg)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, d := range driverPackages {
				if dep == d || strings.HasPrefix(dep, d+"/") {
					t.Errorf("go list -deps %s includes the driver package %s: %s must reach drivers only through a Dialect (package pgdialect, or reflection as validate reads *mysql.MySQLError)", pkg, dep, pkg)
				}
			}
		}
	}
}
