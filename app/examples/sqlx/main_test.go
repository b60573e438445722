package main

import "testing"

// TestExample runs the example as `go run ./app/examples/sqlx` does, on the embedded server.
func TestExample(t *testing.T) {
	if err := run(""); err != nil {
		t.Fatal(err)
	}
}
