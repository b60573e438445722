// Package collectortest holds what the collectors' tests share: an
// in-memory span store that counts duplicates and can be slowed or made to
// fail, and a server around it.
package collectortest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	zmodel "github.com/openzipkin/zipkin-go/model"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// Key names a span: trace ID (low 64 bits) and span ID.
type Key struct{ Trace, Span uint64 }

// SpanModel is a zipkin-go span of its own trace, numbered n: trace ID
// high bits run (random per run), low bits n+1, span ID n+1 (see KeyOf).
func SpanModel(run uint64, n int) zmodel.SpanModel {
	return zmodel.SpanModel{
		SpanContext: zmodel.SpanContext{
			TraceID: zmodel.TraceID{High: run, Low: uint64(n) + 1},
			ID:      zmodel.ID(uint64(n) + 1),
		},
		Name:          "op",
		Kind:          zmodel.Server,
		Timestamp:     time.Now(),
		Duration:      time.Millisecond,
		LocalEndpoint: &zmodel.Endpoint{ServiceName: "svc"},
	}
}

// KeyOf is the Key of SpanModel's span number n.
func KeyOf(n int) Key { return Key{Trace: uint64(n) + 1, Span: uint64(n) + 1} }

// Store is an in-memory storage.Storage whose writes are idempotent, as
// the MySQL store's are: a span accepted twice is kept once, and Accepts
// counts every time it was accepted.
type Store struct {
	storage.Noop

	mu      sync.Mutex
	spans   map[Key]model.Span
	accepts map[Key]int
	hook    func(ctx context.Context, spans []model.Span) error
	changed chan struct{} // closed and replaced at every successful Accept
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{spans: map[Key]model.Span{}, accepts: map[Key]int{}, changed: make(chan struct{})}
}

// SetHook makes every Accept call h first; an error from h fails the
// Accept. nil removes the hook.
func (s *Store) SetHook(h func(ctx context.Context, spans []model.Span) error) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

// Accept stores spans (idempotently).
func (s *Store) Accept(ctx context.Context, spans []model.Span) error {
	s.mu.Lock()
	h := s.hook
	s.mu.Unlock()
	if h != nil {
		if err := h(ctx, spans); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range spans {
		k := Key{sp.TraceID.Low, uint64(sp.ID)}
		s.spans[k] = sp
		s.accepts[k]++
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// Len returns the number of distinct spans stored.
func (s *Store) Len() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.spans) }

// Has reports whether the span is stored.
func (s *Store) Has(k Key) bool { s.mu.Lock(); defer s.mu.Unlock(); _, ok := s.spans[k]; return ok }

// Redelivered returns how many accepts were of spans already stored.
func (s *Store) Redelivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.accepts {
		n += c - 1
	}
	return n
}

// WaitLen waits until at least n distinct spans are stored, or fails the
// test after timeout.
func (s *Store) WaitLen(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, ch := len(s.spans), s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%d spans stored after %v, want %d", got, timeout, n)
		}
	}
}

// WaitAll waits until the spans SpanModel numbered 0 to n-1 made are all
// stored, or fails the test after timeout naming the first one missing.
func (s *Store) WaitAll(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	s.WaitLen(t, n, timeout)
	for i := range n {
		if !s.Has(KeyOf(i)) {
			t.Fatalf("span %d not stored (%d distinct spans stored)", i, s.Len())
		}
	}
}

// Slow returns a hook that makes every Accept take d more (until its
// context ends).
func Slow(d time.Duration) func(ctx context.Context, spans []model.Span) error {
	return func(ctx context.Context, _ []model.Span) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ErrDown is the error of Down.
var ErrDown = errors.New("collectortest: the store is down")

// Down is a hook that fails every Accept, as a store being restarted.
func Down(context.Context, []model.Span) error { return ErrDown }

// Server is a span server on a Store, for a collector's tests.
type Server struct {
	*server.Server
	Registry *prometheus.Registry
}

// NewServer starts a server.Server on store with cfg (its Storage,
// Registerer and, when nil, Logger are set here) and closes it in
// t.Cleanup.
func NewServer(t testing.TB, store storage.Storage, cfg server.Config) *Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Storage = store
	cfg.Registerer = reg
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return &Server{Server: s, Registry: reg}
}

// Metric returns the value of the metric name with label transport=tr
// (0 when absent).
func (s *Server) Metric(t testing.TB, name, tr string) float64 {
	t.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			match := false
			for _, l := range m.GetLabel() {
				if l.GetName() == "transport" && l.GetValue() == tr {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
		return sum
	}
	return 0
}

// CheckCounts fails the test unless the transport's message and span
// counters are both n, none of its messages was dropped, and it counted
// some bytes.
func (s *Server) CheckCounts(t testing.TB, transport string, n int) {
	t.Helper()
	for name, want := range map[string]float64{server.NameMessages: float64(n), server.NameSpans: float64(n), server.NameMessagesDropped: 0} {
		if got := s.Metric(t, name, transport); got != want {
			t.Errorf("%s{transport=%s} = %v, want %v", name, transport, got, want)
		}
	}
	if got := s.Metric(t, server.NameBytes, transport); got <= 0 {
		t.Errorf("%s{transport=%s} = %v, want some bytes", server.NameBytes, transport, got)
	}
}
