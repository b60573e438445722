package validate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestErrorNumber(t *testing.T) {
	err := fmt.Errorf("prepare: %w", &mysql.MySQLError{Number: 1461, Message: "Can't create more than max_prepared_stmt_count statements"})
	if n, ok := ErrorNumber(err); !ok || n != 1461 {
		t.Fatalf("ErrorNumber = %d, %v; want 1461, true", n, ok)
	}
	if _, ok := ErrorNumber(errors.New("plain")); ok {
		t.Fatal("ErrorNumber found a number in a plain error")
	}
}
