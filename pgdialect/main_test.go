package pgdialect_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sqlpool/sqlpool/internal/leakcheck"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
)

// TestMain stops the shared server after the tests and fails the binary if goroutines leak.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
