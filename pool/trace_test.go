package pool

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A Trace with only some fields set gets those events and no others; New copies the Trace, so
// setting a field afterwards has no effect; Validated gets the acquire's ctx.
func TestTracePartialAndCopied(t *testing.T) {
	type key struct{}
	var closed, validated, sawCtx, late atomic.Int32
	tr := &Trace{
		Closed: func(string, CloseReason) { closed.Add(1) },
		Validated: func(ctx context.Context, _ string, took time.Duration, alive bool) {
			validated.Add(1)
			if ctx.Value(key{}) == "acquire" && alive && took >= 0 {
				sawCtx.Add(1)
			}
		},
	}
	p, _ := newPool(t, Config{MaxConns: 1, AliveBypassWindow: -1, Trace: tr})
	tr.Released = func(string, time.Duration) { late.Add(1) }
	eventually(t, "the first connection", func() bool { return p.Stats().Idle == 1 })
	for range 3 {
		c, err := p.Connect(context.WithValue(context.Background(), key{}, "acquire"))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	p.SoftEvict()
	eventually(t, "the eviction", func() bool { return closed.Load() == 1 })
	if validated.Load() != 3 || sawCtx.Load() != 3 {
		t.Fatalf("Validated %d times, %d with the acquire's ctx; want 3 and 3", validated.Load(), sawCtx.Load())
	}
	if late.Load() != 0 {
		t.Fatal("a Released set after New was called: New must copy the Trace")
	}
}
