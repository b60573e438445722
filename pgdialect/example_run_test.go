package pgdialect_test

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/internal/pgtest"
)

// TestExample runs Example on a private PostgreSQL server (skipped without one) and compares
// what it prints with its Output comment, which go test alone cannot do without a server.
func TestExample(t *testing.T) {
	s := pgtest.Shared(t)
	t.Setenv("DATABASE_URL", s.DSN())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() { os.Stdout = stdout }()
		Example()
	}()
	w.Close()
	got := <-done
	want := "borrower: pg_catalog\nnext borrower: \"$user\", public\n"
	if got != want {
		t.Fatalf("Example printed\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(got, "error") {
		t.Fatal(got)
	}
}
