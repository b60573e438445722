package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	zmodel "github.com/openzipkin/zipkin-go/model"
	zkafka "github.com/openzipkin/zipkin-go/reporter/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sqlpool/sqlpool/app/zipkin/collector/internal/collectortest"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
	"github.com/sqlpool/sqlpool/internal/testutil"
)

// TestRestartsLoseNothing is the bounded version of the bar: spans sent
// by zipkin-go's reporter while the store goes down and comes back once,
// and while the collector and its server are killed (nothing drained,
// nothing more committed) and started again on the same store: every span
// is stored, and each once (the store's writes are idempotent; the count
// of redelivered spans is logged).
func TestRestartsLoseNothing(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	c := cluster(t, 4)
	store := collectortest.NewStore()
	cfg := server.Config{RetryDeadline: time.Minute, MaxQueueSpans: 2_000}
	srv1 := collectortest.NewServer(t, store, cfg)
	tr1, err := srv1.Transport("kafka")
	if err != nil {
		t.Fatal(err)
	}
	col1, err := Start(Config{Brokers: c.ListenAddrs(), Transport: tr1, Logger: slog.New(slog.DiscardHandler),
		CommitInterval: 100 * time.Millisecond, Options: testOptions})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := zkafka.NewReporter(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	run := rand.Uint64()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			rep.Send(collectortest.SpanModel(run, i))
			if i%500 == 0 {
				time.Sleep(5 * time.Millisecond) // a steady stream, not one burst
			}
		}
	}()

	store.WaitLen(t, n/5, time.Minute)
	store.SetHook(collectortest.Down) // the store "restarts"
	time.Sleep(time.Second)
	store.SetHook(nil)

	store.WaitLen(t, n/2, time.Minute)
	col1.Kill()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	_ = srv1.Close(dead) // abandon the queue, as a crash does
	before := store.Len()

	srv2 := collectortest.NewServer(t, store, cfg)
	start(t, c, srv2, Config{CommitInterval: 100 * time.Millisecond})
	<-sent
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	store.WaitAll(t, n, 2*time.Minute)
	if got := store.Len(); got != n {
		t.Fatalf("%d distinct spans stored, want %d", got, n)
	}
	t.Logf("%d spans; %d stored before the kill; %d accepts were of spans already stored (read again after the kill)",
		n, before, store.Redelivered())
}

// TestPoisonMessages: 1,000 poison messages (not spans, malformed JSON, a
// bare object, thrift, proto3 garbage, larger than the bound) mixed into
// 10,000 good ones: the 10,000 are stored, the 1,000 counted as dropped
// messages and each logged once with its offset, and consumption never
// stops.
func TestPoisonMessages(t *testing.T) {
	good, bad := 10_000, 1_000
	if testing.Short() {
		good, bad = 1_000, 100
	}
	c := cluster(t, 3)
	store := collectortest.NewStore()
	srv := collectortest.NewServer(t, store, server.Config{MaxBodyBytes: 64 << 10})
	logs := &testutil.Buffer{}
	start(t, c, srv, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	prod := producer(t, c)
	poison := [][]byte{
		[]byte("not spans at all"),
		[]byte(`[{"traceId":"000000000000000a","id":`),            // malformed JSON
		[]byte(`{"traceId":"1","id":"1"}`),                        // a bare object
		{12, 0, 0, 0, 1, 11, 0, 1},                                // a thrift list
		{10, 5, 1, 2, 3},                                          // proto3 framing broken
		[]byte(`[{"traceId":"XYZ","id":"1","localEndpoint":{}}]`), // an invalid ID
		append([]byte(`[{"traceId":"1","id":"1","name":"`), bytes.Repeat([]byte("x"), 70<<10)...), // too big
		{'['}, // one byte
	}
	run := rand.Uint64()
	var recs []*kgo.Record
	for i := range good {
		b, _ := json.Marshal([]zmodel.SpanModel{collectortest.SpanModel(run, i)})
		recs = append(recs, &kgo.Record{Value: b})
	}
	for i := range bad {
		at := rand.IntN(len(recs) + 1)
		recs = append(recs[:at], append([]*kgo.Record{{Value: poison[i%len(poison)]}}, recs[at:]...)...)
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store.WaitLen(t, good, time.Minute)
	waitFor(t, "the poison messages to be counted", func() bool {
		return srv.Metric(t, server.NameMessagesDropped, "kafka") >= float64(bad)
	})
	if got := srv.Metric(t, server.NameMessagesDropped, "kafka"); got != float64(bad) {
		t.Errorf("messages dropped = %v, want %d", got, bad)
	}
	if got := srv.Metric(t, server.NameMessages, "kafka"); got != float64(good+bad) {
		t.Errorf("messages = %v, want %d", got, good+bad)
	}
	if got := strings.Count(logs.String(), "poison message skipped"); got != bad {
		t.Errorf("%d poison log lines, want %d (one each)", got, bad)
	}
	if !strings.Contains(logs.String(), "at="+DefaultTopic+"/") {
		t.Errorf("the poison log lines do not name topic/partition@offset:\n%.500s", logs)
	}
}

// TestRefusedForGood: a record whose spans the store refuses until the
// retry deadline is logged with its span IDs, counted as dropped spans of
// the transport, and committed: the partition goes on.
func TestRefusedForGood(t *testing.T) {
	c := cluster(t, 1)
	store := collectortest.NewStore()
	store.SetHook(func(_ context.Context, spans []model.Span) error {
		for _, sp := range spans {
			if sp.ID == 1 {
				return fmt.Errorf("Data too long for column 'name'")
			}
		}
		return nil
	})
	logs := &testutil.Buffer{}
	srv := collectortest.NewServer(t, store, server.Config{Writers: 1, BatchSpans: 1, RetryDeadline: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	col := start(t, c, srv, Config{})
	prod := producer(t, c)
	run := rand.Uint64()
	for i := range 5 {
		b, _ := json.Marshal([]zmodel.SpanModel{collectortest.SpanModel(run, i)})
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	store.WaitLen(t, 4, 30*time.Second)
	waitFor(t, "the refused span to be counted", func() bool { return srv.Metric(t, server.NameSpansDropped, "kafka") == 1 })
	if want := fmt.Sprintf("%016x%016x/%016x", run, 1, 1); !strings.Contains(logs.String(), want) {
		t.Errorf("the error log does not name %s:\n%s", want, logs)
	}
	if err := col.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, c, 1)[0]; got != 5 {
		t.Errorf("committed %d, want 5 (the refused record is not retried forever)", got)
	}
}

// TestBackPressure: with the store slower than the producer, the queue
// stays within its bound and the backlog stays in Kafka (the group's lag
// grows); once the store is fast again the lag drains to 0.
func TestBackPressure(t *testing.T) {
	c := cluster(t, 2)
	store := collectortest.NewStore()
	store.SetHook(collectortest.Slow(20 * time.Millisecond))
	const maxQueue = 100
	srv := collectortest.NewServer(t, store, server.Config{Writers: 1, BatchSpans: 10, MaxQueueSpans: maxQueue})
	col := start(t, c, srv, Config{})
	prod := producer(t, c)
	const n = 5_000
	run := rand.Uint64()
	var recs []*kgo.Record
	for i := range n {
		b, _ := json.Marshal([]zmodel.SpanModel{collectortest.SpanModel(run, i)})
		recs = append(recs, &kgo.Record{Value: b})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The store takes ~500 spans/s: the backlog is in Kafka.
	var peak int64
	waitFor(t, "lag to show the backlog", func() bool {
		l, err := col.Lag(context.Background())
		if err == nil && l > peak {
			peak = l
		}
		if sp, _ := srv.QueueDepth(); sp > maxQueue {
			t.Fatalf("queue depth %d above its bound %d", sp, maxQueue)
		}
		return peak > n/2
	})
	if got := store.Len(); got > n/2 {
		t.Fatalf("%d spans already stored: the store was not slower than the producer", got)
	}
	store.SetHook(nil)
	store.WaitLen(t, n, time.Minute)
	waitFor(t, "lag to drain", func() bool { l, err := col.Lag(context.Background()); return err == nil && l == 0 })
	t.Logf("peak lag %d records with the queue bounded at %d spans", peak, maxQueue)
}

// waitFor polls cond every 10 ms for up to 60 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
