package sqlmockpool_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sqlpool/sqlpool/internal/leakcheck"
)

// TestMain fails the binary if goroutines leak.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
