package main

import "testing"

// TestExample runs the example as `go run ./app/examples/gorm` does, on the embedded server.
func TestExample(t *testing.T) {
	if err := run(""); err != nil {
		t.Fatal(err)
	}
}
