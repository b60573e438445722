// Package kafka is Zipkin's Kafka collector: a consumer group that reads
// lists of spans from topics (KAFKA_TOPIC, "zipkin" by default) and hands
// them to the server's ingest queue, committing a record's offset only once
// its spans are stored.
//
// Each of Config.Streams workers is a franz-go client in the group. A
// worker polls, and for every record decodes the message (JSON v1/v2 or
// proto3, detected as Zipkin does; see package collector) and offers the
// spans to the queue; while the queue is full the offer waits, so the
// worker stops polling and the backlog stays in Kafka (franz-go holds at
// most one buffered fetch per broker, bounded by FetchMaxBytes). When the
// spans of a record are stored, the record is marked; the offset committed
// for a partition is the one after its longest prefix of marked records,
// every Config.CommitInterval, when partitions are revoked, and on Close.
// Spans queued but not stored when the process dies are therefore read
// again after a restart; the store's writes are idempotent, so they are
// stored once.
//
// A poison record (not spans, malformed, thrift, larger than the server's
// MaxBodyBytes) is counted, logged once with its topic/partition@offset
// and marked, so that it never blocks its partition. A record whose spans
// the store refuses until the retry deadline is logged with its span IDs,
// counted in zipkin_collector_spans_dropped_total{transport="kafka"}, and
// marked too.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sqlpool/sqlpool/app/zipkin/collector"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// Defaults of Config, Zipkin's where Zipkin has one.
const (
	DefaultTopic          = "zipkin"
	DefaultGroupID        = "zipkin"
	DefaultStreams        = 1
	DefaultCommitInterval = time.Second
	DefaultLagInterval    = 5 * time.Second
	DefaultFetchMaxBytes  = 8 << 20
	// DefaultPollRecords is how many records a worker takes per poll.
	DefaultPollRecords = 500
	// CheckTimeout bounds Check's wait for a broker, one second as in
	// Zipkin's KafkaCollector.check.
	CheckTimeout = time.Second
)

// NameLag is the consumer-lag gauge: per topic and partition, the
// partition's end offset minus the group's committed offset.
const NameLag = "zipkin_collector_kafka_lag"

// Config configures a Collector. Brokers and Transport are required; the
// zero value of every other field is the documented default.
type Config struct {
	// Brokers are the seed brokers, host:port (Zipkin's
	// KAFKA_BOOTSTRAP_SERVERS, comma-separated there).
	Brokers []string
	// Topics are consumed by every worker (KAFKA_TOPIC). Zero value:
	// ["zipkin"]. The collector does not create them; it waits for them.
	Topics []string
	// GroupID is the consumer group (KAFKA_GROUP_ID). Zero value: "zipkin".
	GroupID string
	// Streams is the number of workers, one client each (KAFKA_STREAMS).
	// Zero value: 1.
	Streams int

	// Transport is the server's entry point, normally
	// server.Server.Transport("kafka"). Required.
	Transport *server.Transport
	// Logger receives the collector's logs (poison records, client
	// warnings). Zero value: slog.Default().
	Logger *slog.Logger
	// Registerer receives the lag gauge (NameLag). Zero value: none is
	// registered (Lag still answers).
	Registerer prometheus.Registerer

	// CommitInterval is how often marked offsets are committed. Zero
	// value: 1 s.
	CommitInterval time.Duration
	// LagInterval is how often the lag gauge is refreshed. Zero value: 5 s.
	LagInterval time.Duration
	// FetchMaxBytes bounds one fetch response, and so what a worker holds
	// buffered per broker while the queue is full. Zero value: 8 MiB.
	FetchMaxBytes int32

	// Options are added to every client's options, after the collector's
	// own (tests use it for short session timeouts).
	Options []kgo.Opt
}

// Collector is a running Kafka collector. Create one with Start; stop it
// with Close.
type Collector struct {
	cfg     Config
	log     *slog.Logger
	handler *collector.Handler
	workers []*worker
	admin   *kadm.Client
	lag     *prometheus.GaugeVec

	ctx    context.Context // ends at Close: polls stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the workers' loops and the lag refresher

	inflight sync.WaitGroup // records queued and not yet completed
}

// Start checks cfg, creates the clients (which connect in the background:
// an unreachable broker is retried, not an error) and starts the workers.
func Start(cfg Config) (*Collector, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers (KAFKA_BOOTSTRAP_SERVERS)")
	}
	if cfg.Transport == nil {
		return nil, errors.New("kafka: Config.Transport is nil")
	}
	if cfg.Streams < 0 || cfg.CommitInterval < 0 || cfg.LagInterval < 0 || cfg.FetchMaxBytes < 0 {
		return nil, errors.New("kafka: Streams, CommitInterval, LagInterval and FetchMaxBytes must not be negative; use 0 for the default")
	}
	if len(cfg.Topics) == 0 {
		cfg.Topics = []string{DefaultTopic}
	}
	if cfg.GroupID == "" {
		cfg.GroupID = DefaultGroupID
	}
	if cfg.Streams == 0 {
		cfg.Streams = DefaultStreams
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = DefaultCommitInterval
	}
	if cfg.LagInterval == 0 {
		cfg.LagInterval = DefaultLagInterval
	}
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Collector{
		cfg:     cfg,
		log:     cfg.Logger,
		handler: &collector.Handler{Transport: cfg.Transport, Logger: cfg.Logger},
		ctx:     ctx,
		cancel:  cancel,
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameLag, ConstLabels: prometheus.Labels{"transport": "kafka"},
			Help: "Records of the partition not yet committed by the consumer group: end offset minus committed offset."},
			[]string{"topic", "partition"}),
	}
	for i := 0; i < cfg.Streams; i++ {
		w := &worker{c: c, id: i, parts: map[tp]*partition{}}
		opts := []kgo.Opt{
			kgo.SeedBrokers(cfg.Brokers...),
			kgo.ConsumerGroup(cfg.GroupID),
			kgo.ConsumeTopics(cfg.Topics...),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.AutoCommitMarks(),
			kgo.AutoCommitInterval(cfg.CommitInterval),
			kgo.FetchMaxBytes(cfg.FetchMaxBytes),
			kgo.FetchMaxPartitionBytes(min(cfg.FetchMaxBytes, 1<<20)),
			kgo.OnPartitionsRevoked(w.revoked),
			kgo.OnPartitionsLost(w.lost),
			kgo.WithLogger(&logger{log: cfg.Logger.With("component", "kafka", "stream", i)}),
			kgo.ClientID("zipkin-mysql-" + strconv.Itoa(i)),
		}
		cl, err := kgo.NewClient(append(opts, cfg.Options...)...)
		if err != nil {
			for _, w := range c.workers {
				w.cl.Close()
			}
			cancel()
			return nil, fmt.Errorf("kafka: %w", err)
		}
		w.cl = cl
		c.workers = append(c.workers, w)
	}
	c.admin = kadm.NewClient(c.workers[0].cl)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(c.lag); err != nil {
			c.closeClients()
			cancel()
			return nil, fmt.Errorf("kafka: registering %s: %w", NameLag, err)
		}
	}
	c.wg.Add(len(c.workers) + 1)
	for _, w := range c.workers {
		go w.run()
	}
	go c.refreshLag()
	return c, nil
}

// Close stops polling, waits until the spans of every record already
// queued are stored or given up (or ctx ends), commits the offsets of the
// stored ones, and leaves the group. Records not committed are read again
// by the group's next consumer. Call it before the server's Close, which
// drains the queue.
func (c *Collector) Close(ctx context.Context) error {
	c.cancel()
	c.wg.Wait()
	drained := make(chan struct{})
	go func() { c.inflight.Wait(); close(drained) }()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = fmt.Errorf("kafka: records still being stored when Close gave up waiting (%w); their offsets are not committed, so they are read again", ctx.Err())
	}
	for _, w := range c.workers {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if cerr := w.cl.CommitMarkedOffsets(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("kafka: committing offsets at Close: %w", cerr)
		}
		cancel()
	}
	c.closeClients()
	if c.cfg.Registerer != nil {
		c.cfg.Registerer.Unregister(c.lag)
	}
	return err
}

// Kill stops the collector as a crash would, for tests: it stops polling
// and closes the clients at once, committing nothing more and without
// waiting for the records being stored.
func (c *Collector) Kill() {
	c.cancel()
	for _, w := range c.workers {
		w.killed.Store(true)
	}
	c.wg.Wait()
	for _, w := range c.workers {
		w.cl.Close()
	}
	if c.cfg.Registerer != nil {
		c.cfg.Registerer.Unregister(c.lag)
	}
}

func (c *Collector) closeClients() {
	for _, w := range c.workers {
		w.cl.Close()
	}
}

// Check reports whether the cluster answers: a metadata request to one of
// its brokers must answer within CheckTimeout (or ctx's end, if sooner), as
// Zipkin's health check asks describeCluster. It reports an error after
// Close or Kill. The server lists it in /health as "KafkaCollector".
func (c *Collector) Check(ctx context.Context) error {
	if c.ctx.Err() != nil {
		return errors.New("kafka: the collector is closed")
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	// ListBrokers asks the metadata of every topic. BrokerMetadata (no topic) kept answering
	// on kfake for 30 s after the cluster closed (TestCheck).
	if _, err := c.admin.ListBrokers(ctx); err != nil {
		return fmt.Errorf("kafka: no broker of %s answered a metadata request (waited at most %v): %w", strings.Join(c.cfg.Brokers, ","), CheckTimeout, err)
	}
	return nil
}

// Lag returns the group's lag summed over its partitions: end offsets minus
// committed offsets (a partition without a commit counts from its start).
func (c *Collector) Lag(ctx context.Context) (int64, error) {
	lags, err := c.admin.Lag(ctx, c.cfg.GroupID)
	if err != nil {
		return 0, err
	}
	l, ok := lags[c.cfg.GroupID]
	if !ok {
		return 0, fmt.Errorf("kafka: no lag for group %q", c.cfg.GroupID)
	}
	if l.Error() != nil {
		return 0, l.Error()
	}
	var total int64
	for _, ps := range l.Lag {
		for _, p := range ps {
			if p.Err == nil && p.Lag > 0 {
				total += p.Lag
			}
		}
	}
	return total, nil
}

func (c *Collector) refreshLag() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.LagInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.LagInterval)
		lags, err := c.admin.Lag(ctx, c.cfg.GroupID)
		cancel()
		if err != nil {
			continue
		}
		if l, ok := lags[c.cfg.GroupID]; ok {
			for topic, ps := range l.Lag {
				for p, m := range ps {
					if m.Err == nil {
						c.lag.WithLabelValues(topic, strconv.Itoa(int(p))).Set(float64(m.Lag))
					}
				}
			}
		}
	}
}
