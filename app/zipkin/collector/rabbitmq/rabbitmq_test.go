package rabbitmq

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
	zamqp "github.com/openzipkin/zipkin-go/reporter/amqp"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/app/internal/rabbittest"
	"github.com/sqlpool/sqlpool/app/zipkin/collector/internal/collectortest"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// zipkin-go's AMQP reporter never ends its error-logging goroutine
		// (Close does not close its channel).
		goleak.IgnoreTopFunction("github.com/openzipkin/zipkin-go/reporter/amqp.(*rmqReporter).logErrors"))
}

// start starts a collector on broker b for srv, closed in t.Cleanup.
func start(t testing.TB, b *rabbittest.Broker, srv *collectortest.Server, cfg Config) *Collector {
	t.Helper()
	tr, err := srv.Transport("rabbitmq")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URI == "" && len(cfg.Addresses) == 0 {
		cfg.Addresses = []string{fmt.Sprintf("127.0.0.1:%d", b.Port)}
	}
	cfg.Transport = tr
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	col, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = col.Close(ctx)
	})
	return col
}

// publisher returns a channel to publish raw messages on b, closed in
// t.Cleanup.
func publisher(t testing.TB, b *rabbittest.Broker) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func publish(t testing.TB, ch *amqp.Channel, body []byte) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), "", DefaultQueue, false, false, amqp.Publishing{Body: body}); err != nil {
		t.Fatal(err)
	}
}

// ready returns the messages ready in the queue (not delivered or
// unacknowledged).
func ready(t testing.TB, ch *amqp.Channel) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(DefaultQueue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

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

// TestRabbitMQ runs the collector's cases on one private broker.
func TestRabbitMQ(t *testing.T) {
	b := rabbittest.Start(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *rabbittest.Broker)
	}{
		{"ZipkinGoReporter", testZipkinGoReporter},
		{"AckOnlyAfterStored", testAckOnlyAfterStored},
		{"RestartsLoseNothing", testRestartsLoseNothing},
		{"PoisonMessages", testPoisonMessages},
		{"BackPressure", testBackPressure},
		{"Config", testConfig},
		{"Check", testCheck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every case starts with an empty queue "zipkin".
			ch := publisher(t, b)
			if _, err := ch.QueueDelete(DefaultQueue, false, false, false); err != nil {
				t.Fatal(err)
			}
			tc.f(t, b)
		})
	}
}

// testZipkinGoReporter: spans sent by zipkin-go's AMQP reporter (exchange
// and queue "zipkin") are stored and counted under transport="rabbitmq".
func testZipkinGoReporter(t *testing.T, b *rabbittest.Broker) {
	store := collectortest.NewStore()
	srv := collectortest.NewServer(t, store, server.Config{})
	start(t, b, srv, Config{URI: b.URL, Concurrency: 2})
	rep, err := zamqp.NewReporter(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	run := rand.Uint64()
	for i := range n {
		rep.Send(collectortest.SpanModel(run, i))
	}
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	store.WaitAll(t, n, 30*time.Second)
	srv.CheckCounts(t, "rabbitmq", n)
}

// testAckOnlyAfterStored: a message whose spans are not stored yet is not
// acknowledged: when the collector dies, the broker delivers it again to
// the next one, while the messages stored before are not.
func testAckOnlyAfterStored(t *testing.T, b *rabbittest.Broker) {
	store := collectortest.NewStore()
	release := make(chan struct{})
	store.SetHook(func(ctx context.Context, spans []model.Span) error {
		for _, sp := range spans {
			if sp.ID == 1 {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	})
	srv := collectortest.NewServer(t, store, server.Config{Writers: 4})
	col := start(t, b, srv, Config{})
	pub := publisher(t, b)
	run := rand.Uint64()
	const n = 40
	for i := range n {
		body, _ := json.Marshal([]zmodel.SpanModel{collectortest.SpanModel(run, i)})
		publish(t, pub, body)
	}
	store.WaitLen(t, n/2, 30*time.Second)
	col.Kill()
	if store.Has(collectortest.KeyOf(0)) {
		t.Fatal("span 0 stored while blocked")
	}
	waitFor(t, "the unacknowledged messages to be back in the queue", func() bool { return ready(t, pub) > 0 })
	back := ready(t, pub)
	if back >= n {
		t.Fatalf("%d messages back in the queue: stored ones were not acknowledged", back)
	}
	close(release)
	store.SetHook(nil)
	srv2 := collectortest.NewServer(t, store, server.Config{})
	start(t, b, srv2, Config{})
	store.WaitLen(t, n, 30*time.Second)
	waitFor(t, "the queue to drain", func() bool { return ready(t, pub) == 0 })
	t.Logf("%d of %d messages were delivered again after the kill", back, n)
}

// testRestartsLoseNothing is the bounded version of the bar: spans sent by
// zipkin-go's reporter while the store goes down and comes back once, and
// while the collector and its server are killed and started again: every
// span is stored, each once.
func testRestartsLoseNothing(t *testing.T, b *rabbittest.Broker) {
	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	store := collectortest.NewStore()
	cfg := server.Config{RetryDeadline: time.Minute, MaxQueueSpans: 2_000}
	srv1 := collectortest.NewServer(t, store, cfg)
	col1 := start(t, b, srv1, Config{Concurrency: 2})
	rep, err := zamqp.NewReporter(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	run := rand.Uint64()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			rep.Send(collectortest.SpanModel(run, i))
		}
	}()
	store.WaitLen(t, n/5, time.Minute)
	store.SetHook(collectortest.Down)
	time.Sleep(time.Second)
	store.SetHook(nil)
	store.WaitLen(t, n/2, time.Minute)
	col1.Kill()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	_ = srv1.Close(dead)
	before := store.Len()
	srv2 := collectortest.NewServer(t, store, cfg)
	start(t, b, srv2, Config{Concurrency: 2})
	<-sent
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	store.WaitAll(t, n, 2*time.Minute)
	t.Logf("%d spans; %d stored before the kill; %d accepts were of spans already stored", n, before, store.Redelivered())
}

// testPoisonMessages: 1,000 poison messages among 10,000 good ones: the
// 10,000 are stored, the 1,000 counted and logged once each with their
// delivery tag, and consumption never stops.
func testPoisonMessages(t *testing.T, b *rabbittest.Broker) {
	good, bad := 10_000, 1_000
	if testing.Short() {
		good, bad = 1_000, 100
	}
	store := collectortest.NewStore()
	srv := collectortest.NewServer(t, store, server.Config{MaxBodyBytes: 64 << 10})
	logs := &testutil.Buffer{}
	start(t, b, srv, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	pub := publisher(t, b)
	poison := [][]byte{
		[]byte("not spans at all"),
		[]byte(`[{"traceId":"000000000000000a","id":`),
		[]byte(`{"traceId":"1","id":"1"}`),
		{12, 0, 0, 0, 1, 11, 0, 1},
		{10, 5, 1, 2, 3},
		[]byte(`[{"traceId":"XYZ","id":"1","localEndpoint":{}}]`),
		append([]byte(`[{"traceId":"1","id":"1","name":"`), bytes.Repeat([]byte("x"), 70<<10)...),
	}
	run := rand.Uint64()
	var bodies [][]byte
	for i := range good {
		body, _ := json.Marshal([]zmodel.SpanModel{collectortest.SpanModel(run, i)})
		bodies = append(bodies, body)
	}
	for i := range bad {
		at := rand.IntN(len(bodies) + 1)
		bodies = append(bodies[:at], append([][]byte{poison[i%len(poison)]}, bodies[at:]...)...)
	}
	for _, body := range bodies {
		publish(t, pub, body)
	}
	store.WaitLen(t, good, 2*time.Minute)
	waitFor(t, "the poison messages to be counted", func() bool {
		return srv.Metric(t, server.NameMessagesDropped, "rabbitmq") >= float64(bad)
	})
	if got := srv.Metric(t, server.NameMessagesDropped, "rabbitmq"); got != float64(bad) {
		t.Errorf("messages dropped = %v, want %d", got, bad)
	}
	if got := strings.Count(logs.String(), "poison message skipped"); got != bad {
		t.Errorf("%d poison log lines, want %d", got, bad)
	}
	if !strings.Contains(logs.String(), `at="delivery tag `) {
		t.Errorf("the poison log lines do not name the delivery tag:\n%.500s", logs)
	}
	waitFor(t, "the queue to drain", func() bool { return ready(t, pub) == 0 })
}

// testBackPressure: with the store slower than the producer, the ingest
// queue stays within its bound, the collector holds at most its prefetch
// unacknowledged, and the backlog waits in RabbitMQ; then it drains.
func testBackPressure(t *testing.T, b *rabbittest.Broker) {
	store := collectortest.NewStore()
	store.SetHook(collectortest.Slow(20 * time.Millisecond))
	const maxQueue = 100
	srv := collectortest.NewServer(t, store, server.Config{Writers: 1, BatchSpans: 10, MaxQueueSpans: maxQueue})
	col := start(t, b, srv, Config{Concurrency: 2})
	if p := col.Prefetch(); p != maxQueue/2 {
		t.Errorf("prefetch %d, want %d (the queue's free spans shared by the consumers)", p, maxQueue/2)
	}
	pub := publisher(t, b)
	const n = 3_000
	run := rand.Uint64()
	for i := range n {
		body, _ := json.Marshal([]zmodel.SpanModel{collectortest.SpanModel(run, i)})
		publish(t, pub, body)
	}
	var peak int
	waitFor(t, "the backlog to show in the broker", func() bool {
		if r := ready(t, pub); r > peak {
			peak = r
		}
		if sp, _ := srv.QueueDepth(); sp > maxQueue {
			t.Fatalf("queue depth %d above its bound %d", sp, maxQueue)
		}
		return peak > n/2
	})
	store.SetHook(nil)
	store.WaitLen(t, n, time.Minute)
	waitFor(t, "the queue to drain", func() bool { return ready(t, pub) == 0 })
	t.Logf("peak backlog %d messages in RabbitMQ with the ingest queue bounded at %d spans", peak, maxQueue)
}

// testConfig: addresses, user, password and virtual host make the URI the
// broker accepts, and a wrong password is an error at Start.
func testConfig(t *testing.T, b *rabbittest.Broker) {
	store := collectortest.NewStore()
	srv := collectortest.NewServer(t, store, server.Config{})
	tr, err := srv.Transport("rabbitmq")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", b.Port)
	if _, err := Start(Config{Addresses: []string{addr}, Password: "wrong", Transport: tr, ConnectionTimeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Fatal("Start with a wrong password succeeded")
	}
	cfg := Config{Addresses: []string{"127.0.0.1:1", addr}, User: "guest", Password: "guest", VirtualHost: "/"}
	urls, err := cfg.urls()
	if err != nil {
		t.Fatal(err)
	}
	if want := "amqp://guest:guest@" + addr + "/%2F"; urls[1] != want {
		t.Errorf("URI %q, want %q", urls[1], want)
	}
	if got, _ := (&Config{Addresses: []string{"h"}, UseTLS: true}).urls(); got[0] != "amqps://guest:guest@h:5671/%2F" {
		t.Errorf("TLS URI without a port: %q", got[0])
	}
	_ = srv
}

// testCheck: Check answers nil while connected; when the connection is
// cut and the broker cannot be reached, an error that says so and names
// the broker without its credentials; nil again once the collector has
// reconnected; and an error after Close.
func testCheck(t *testing.T, b *rabbittest.Broker) {
	proxy := mysqltest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", b.Port))
	srv := collectortest.NewServer(t, collectortest.NewStore(), server.Config{})
	col := start(t, b, srv, Config{Addresses: []string{proxy.Addr()}})
	ctx := context.Background()
	if err := col.Check(ctx); err != nil {
		t.Fatalf("Check after Start: %v", err)
	}
	proxy.Refuse(true)
	proxy.ResetAll()
	var err error
	testutil.Eventually(t, 30*time.Second, "Check to fail with the broker unreachable", func() bool {
		err = col.Check(ctx)
		return err != nil
	})
	t.Logf("Check with the broker unreachable: %v", err)
	if !strings.Contains(err.Error(), "not connected to "+proxy.Addr()) || strings.Contains(err.Error(), "guest") {
		t.Fatalf("Check with the broker unreachable: %v; want it to name %s, without credentials", err, proxy.Addr())
	}
	proxy.Refuse(false)
	testutil.Eventually(t, 30*time.Second, "Check to pass after the collector reconnected", func() bool {
		return col.Check(ctx) == nil
	})
	if err := col.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := col.Check(ctx); err == nil {
		t.Fatal("Check after Close: nil")
	}
}
