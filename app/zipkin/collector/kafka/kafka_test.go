package kafka

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	zmodel "github.com/openzipkin/zipkin-go/model"
	zkafka "github.com/openzipkin/zipkin-go/reporter/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/app/zipkin/collector/internal/collectortest"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
	"github.com/sqlpool/sqlpool/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's (zipkin-go's reporter) metrics registry ticker.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// cluster starts a one-broker kfake cluster with the topic "zipkin" of
// partitions partitions, closed in t.Cleanup.
func cluster(t testing.TB, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testOptions make group changes quick.
var testOptions = []kgo.Opt{
	kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
	kgo.FetchMaxWait(100 * time.Millisecond),
}

// start starts a collector on c for srv and closes it in t.Cleanup (unless
// the test closed or killed it).
func start(t testing.TB, c *kfake.Cluster, srv *collectortest.Server, cfg Config) *Collector {
	t.Helper()
	tr, err := srv.Transport("kafka")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Brokers = c.ListenAddrs()
	cfg.Transport = tr
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Registerer = srv.Registry
	cfg.Options = append(cfg.Options, testOptions...)
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 200 * time.Millisecond
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

// TestZipkinGoReporter: spans sent by zipkin-go's Kafka reporter (sarama)
// to the topic "zipkin" are stored, and counted under transport="kafka".
func TestZipkinGoReporter(t *testing.T) {
	c := cluster(t, 3)
	store := collectortest.NewStore()
	srv := collectortest.NewServer(t, store, server.Config{})
	start(t, c, srv, Config{})
	rep, err := zkafka.NewReporter(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	run := rand.Uint64()
	for i := range n {
		rep.Send(collectortest.SpanModel(run, i))
	}
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	store.WaitAll(t, n, 30*time.Second)
	srv.CheckCounts(t, "kafka", n)
}

// producer returns a franz-go producer to c, closed in t.Cleanup.
func producer(t testing.TB, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(DefaultTopic),
		kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// committed returns the group's committed offset of each partition of the
// topic "zipkin" (-1 when none).
func committed(t testing.TB, c *kfake.Cluster, partitions int32) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, DefaultGroupID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, partitions)
	for p := range out {
		out[p] = -1
		if o, ok := offs.Lookup(DefaultTopic, int32(p)); ok && o.Err == nil {
			out[p] = o.At
		}
	}
	return out
}

// TestCommitOnlyAfterStored: on a partition whose first record's spans are
// not stored yet while the records after it are, no offset is committed;
// once the first is stored, the offset after the last is. A collector
// killed before that leaves the records to be read again by the next one.
func TestCommitOnlyAfterStored(t *testing.T) {
	c := cluster(t, 1)
	store := collectortest.NewStore()
	release := make(chan struct{})
	store.SetHook(func(ctx context.Context, spans []model.Span) error {
		for _, sp := range spans {
			if sp.ID == 1 { // the first record's span
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
	col := start(t, c, srv, Config{})
	prod := producer(t, c)
	const n = 50
	run := rand.Uint64()
	for i := range n {
		b, _ := json.Marshal([]zmodel.SpanModel{collectortest.SpanModel(run, i)})
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Records after record 0 are stored (those of the other writers).
	store.WaitLen(t, n/2, 30*time.Second)
	for range 3 {
		if err := col.workers[0].cl.CommitMarkedOffsets(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := committed(t, c, 1)[0]; got != -1 {
		t.Fatalf("committed offset %d while record 0 is not stored, want none", got)
	}
	close(release)
	store.WaitLen(t, n, 30*time.Second)
	if err := col.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, c, 1)[0]; got != n {
		t.Fatalf("committed offset %d after every record was stored, want %d", got, n)
	}
}

// Check answers nil while the cluster is up; once no broker answers it
// answers an error naming the brokers, each call within about CheckTimeout;
// after the collector is stopped it answers an error at once.
func TestCheck(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs() // not after Close: kfake's admin calls block then
	srv := collectortest.NewServer(t, collectortest.NewStore(), server.Config{})
	tr, err := srv.Transport("kafka")
	if err != nil {
		t.Fatal(err)
	}
	col, err := Start(Config{Brokers: brokers, Transport: tr, Logger: slog.New(slog.DiscardHandler), Options: testOptions})
	if err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			col.Kill()
		}
	}()
	// The first Check may come before the client has connected (a loaded machine).
	testutil.Eventually(t, 30*time.Second, "Check to pass with the cluster up", func() bool {
		return col.Check(context.Background()) == nil
	})
	c.Close()
	// Connections already open may still be answered for a moment.
	var slowest time.Duration
	testutil.Eventually(t, 30*time.Second, "Check to fail with the cluster closed", func() bool {
		start := time.Now()
		err = col.Check(context.Background())
		slowest = max(slowest, time.Since(start))
		return err != nil
	})
	t.Logf("Check with the cluster closed: %v (slowest call %v)", err, slowest.Round(time.Millisecond))
	if !strings.Contains(err.Error(), brokers[0]) {
		t.Fatalf("Check with the cluster closed: %v; want an error naming %s", err, brokers[0])
	}
	if slowest > CheckTimeout+5*time.Second { // generous: a loaded machine
		t.Fatalf("a Check took %v with the cluster closed; it waits at most CheckTimeout (%v)", slowest, CheckTimeout)
	}
	col.Kill()
	killed = true
	if err := col.Check(context.Background()); err == nil {
		t.Fatal("Check after Kill: nil")
	}
}
