package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestFindReportsALeakAndItsStack(t *testing.T) {
	stop := make(chan struct{})
	go parkedForLeakcheckTest(stop)
	err := find(200 * time.Millisecond)
	close(stop)
	if err == nil || !strings.Contains(err.Error(), "parkedForLeakcheckTest") {
		t.Fatalf("Find = %v, want an error naming the parked goroutine", err)
	}
	if err := Find(); err != nil {
		t.Fatalf("after the goroutine ended, Find = %v", err)
	}
}

func TestFindIgnores(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go parkedForLeakcheckTest(stop)
	if err := Find("parkedForLeakcheckTest"); err != nil {
		t.Fatalf("Find with the goroutine ignored = %v", err)
	}
}

func TestVerifyNoneBaseline(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go parkedForLeakcheckTest(stop)
	time.Sleep(10 * time.Millisecond)
	before := Snapshot()
	VerifyNone(t, before) // the parked goroutine predates the snapshot
}

func parkedForLeakcheckTest(stop chan struct{}) { <-stop }
