package otelpool_test

import (
	"testing"

	"github.com/sqlpool/sqlpool/internal/leakcheck"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}
