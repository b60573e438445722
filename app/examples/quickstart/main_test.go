package main

import "testing"

// TestQuickstart runs the README's run command in-process, on the embedded server.
func TestQuickstart(t *testing.T) {
	if err := run(""); err != nil {
		t.Fatal(err)
	}
}
