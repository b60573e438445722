package otelpool_test

import (
	"testing"

	"github.com/sqlpool/sqlpool/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}
