// Package rabbitmq is Zipkin's RabbitMQ collector: consumers that read
// lists of spans from a queue (RABBIT_QUEUE, "zipkin" by default) and hand
// them to the server's ingest queue, acknowledging each message only once
// its spans are stored.
//
// Each of Config.Concurrency consumers has a channel of its own on one
// connection, with manual acknowledgements and a prefetch count bounded by
// the ingest queue's free space (its free spans divided among the
// consumers, at most MaxPrefetch): the broker never sends more unacked
// messages than that, so while the queue is full the backlog stays in
// RabbitMQ. A message's spans are acknowledged (basic.ack) when stored;
// messages not acknowledged when the connection ends, or the process dies,
// are delivered again by the broker, and the store's writes are
// idempotent, so their spans are stored once.
//
// A poison message (not spans, malformed, thrift, larger than the server's
// MaxBodyBytes) is counted, logged once with its delivery tag and
// acknowledged. A message whose spans the store refuses until the retry
// deadline is logged with its span IDs, counted in
// zipkin_collector_spans_dropped_total{transport="rabbitmq"}, and
// acknowledged. A lost connection is dialled again with backoff.
//
// As in Zipkin, the queue is declared (durable, not exclusive, not
// auto-delete) when it does not exist; publishers use the default exchange
// with the queue's name as routing key, or an exchange bound to it
// (zipkin-go's reporter declares exchange "zipkin" and binds the queue).
package rabbitmq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sqlpool/sqlpool/app/zipkin/collector"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// Defaults of Config, Zipkin's.
const (
	DefaultQueue             = "zipkin"
	DefaultUser              = "guest"
	DefaultPassword          = "guest"
	DefaultVirtualHost       = "/"
	DefaultConcurrency       = 1
	DefaultConnectionTimeout = 60 * time.Second
	// MaxPrefetch bounds the prefetch count of one consumer. The writers
	// batch up to 500 spans; a prefetch of a few hundred messages of one
	// span each starves them (on MariaDB through 50 ms of latency, 256
	// gave 104 spans/s where Kafka's collector got 883).
	MaxPrefetch = 2000
)

// Config configures a Collector. Transport and either Addresses or URI
// are required; the zero value of every other field is the documented
// default.
type Config struct {
	// Addresses are the brokers, host or host:port, tried in turn
	// (RABBIT_ADDRESSES, comma-separated there). Without a port: 5672, or
	// 5671 with UseTLS.
	Addresses []string
	// URI is an AMQP URI, amqp://user:pass@host:port/vhost (RABBIT_URI).
	// When set, Addresses, User, Password, VirtualHost and UseTLS are
	// ignored.
	URI string
	// Queue is the queue consumed (RABBIT_QUEUE). Zero value: "zipkin".
	Queue string
	// User and Password authenticate (RABBIT_USER, RABBIT_PASSWORD). Zero
	// values: guest, guest.
	User, Password string
	// VirtualHost is the virtual host (RABBIT_VIRTUAL_HOST). Zero value: "/".
	VirtualHost string
	// UseTLS connects with TLS, amqps (RABBIT_USE_SSL). Default false.
	UseTLS bool
	// TLS is the TLS configuration with UseTLS (or an amqps URI). Zero
	// value: the system's roots.
	TLS *tls.Config
	// Concurrency is the number of consumers, one channel each
	// (RABBIT_CONCURRENCY). Zero value: 1.
	Concurrency int
	// ConnectionTimeout bounds the TCP connect and AMQP handshake
	// (RABBIT_CONNECTION_TIMEOUT, in milliseconds there). Zero value: 60 s.
	ConnectionTimeout time.Duration

	// Transport is the server's entry point, normally
	// server.Server.Transport("rabbitmq"). Required.
	Transport *server.Transport
	// Logger receives the collector's logs. Zero value: slog.Default().
	Logger *slog.Logger
}

// Collector is a running RabbitMQ collector. Create one with Start; stop
// it with Close.
type Collector struct {
	cfg      Config
	urls     []string
	log      *slog.Logger
	handler  *collector.Handler
	prefetch int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the supervisor

	mu      sync.Mutex
	conn    *amqp.Connection // the current connection, nil between two
	lostErr string           // why the last connection ended or the last dial failed, for Check

	inflight sync.WaitGroup // deliveries queued and not yet completed
}

// Start checks cfg, connects (an unreachable broker at start is an error,
// as in Zipkin), declares the queue when it does not exist, and starts the
// consumers.
func Start(cfg Config) (*Collector, error) {
	if cfg.Transport == nil {
		return nil, errors.New("rabbitmq: Config.Transport is nil")
	}
	if cfg.Concurrency < 0 || cfg.ConnectionTimeout < 0 {
		return nil, errors.New("rabbitmq: Concurrency and ConnectionTimeout must not be negative; use 0 for the default")
	}
	urls, err := cfg.urls()
	if err != nil {
		return nil, err
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.ConnectionTimeout == 0 {
		cfg.ConnectionTimeout = DefaultConnectionTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	free, _ := cfg.Transport.Room()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Collector{
		cfg:      cfg,
		urls:     urls,
		log:      cfg.Logger.With("component", "rabbitmq"),
		handler:  &collector.Handler{Transport: cfg.Transport, Logger: cfg.Logger},
		prefetch: max(1, min(MaxPrefetch, free/cfg.Concurrency)),
		ctx:      ctx,
		cancel:   cancel,
	}
	conn, err := c.dial(0)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("rabbitmq: unable to establish connection to RabbitMQ server: %w", err)
	}
	if err := c.declare(conn); err != nil {
		_ = conn.Close()
		cancel()
		return nil, err
	}
	c.conn = conn // Check answers nil from here on
	c.wg.Add(1)
	go c.supervise(conn)
	return c, nil
}

// Check reports whether the collector holds an open connection to the
// broker, as Zipkin's RabbitMQCollector check does; while it is
// reconnecting the error says why the last connection ended or the last
// dial failed. It reports an error after Close or Kill, and does no I/O.
// The server lists it in /health as "RabbitMQCollector".
func (c *Collector) Check(context.Context) error {
	if c.ctx.Err() != nil {
		return errors.New("rabbitmq: the collector is closed")
	}
	c.mu.Lock()
	conn, why := c.conn, c.lostErr
	c.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		if why == "" {
			why = "connection lost"
		}
		return fmt.Errorf("rabbitmq: not connected to %s: %s", c.hosts(), why)
	}
	return nil
}

// hosts returns the brokers' host:port list, without credentials.
func (c *Collector) hosts() string {
	hs := make([]string, 0, len(c.urls))
	for _, raw := range c.urls {
		if u, err := url.Parse(raw); err == nil {
			hs = append(hs, u.Host)
		}
	}
	return strings.Join(hs, ",")
}

// Prefetch returns the prefetch count of each consumer.
func (c *Collector) Prefetch() int { return c.prefetch }

// urls builds the AMQP URIs to try from cfg.
func (cfg *Config) urls() ([]string, error) {
	if cfg.URI != "" {
		if _, err := amqp.ParseURI(cfg.URI); err != nil {
			return nil, fmt.Errorf("rabbitmq: RABBIT_URI: %w", err)
		}
		return []string{cfg.URI}, nil
	}
	if len(cfg.Addresses) == 0 {
		return nil, errors.New("rabbitmq: no broker (RABBIT_ADDRESSES or RABBIT_URI)")
	}
	scheme, port := "amqp", "5672"
	if cfg.UseTLS {
		scheme, port = "amqps", "5671"
	}
	user, pass, vhost := cfg.User, cfg.Password, cfg.VirtualHost
	if user == "" {
		user = DefaultUser
	}
	if pass == "" {
		pass = DefaultPassword
	}
	if vhost == "" {
		vhost = DefaultVirtualHost
	}
	var out []string
	for _, a := range cfg.Addresses {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(a, port)
		}
		u := url.URL{Scheme: scheme, User: url.UserPassword(user, pass), Host: a, Path: "/" + vhost, RawPath: "/" + url.PathEscape(vhost)}
		out = append(out, u.String())
	}
	if len(out) == 0 {
		return nil, errors.New("rabbitmq: RABBIT_ADDRESSES is empty")
	}
	return out, nil
}

// dial connects to the i-th address (modulo their number).
func (c *Collector) dial(i int) (*amqp.Connection, error) {
	u := c.urls[i%len(c.urls)]
	cfg := amqp.Config{
		Dial:       amqp.DefaultDial(c.cfg.ConnectionTimeout),
		Properties: amqp.Table{"connection_name": "zipkin-mysql"},
	}
	if strings.HasPrefix(u, "amqps:") {
		cfg.TLSClientConfig = c.cfg.TLS
		if cfg.TLSClientConfig == nil {
			cfg.TLSClientConfig = &tls.Config{}
		}
	}
	return amqp.DialConfig(u, cfg)
}

// declare declares the queue, durable, when a passive declare finds none.
func (c *Collector) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	_, err = ch.QueueDeclarePassive(c.cfg.Queue, true, false, false, false, nil)
	if err == nil {
		return ch.Close()
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		return fmt.Errorf("rabbitmq: checking queue %q: %w", c.cfg.Queue, err)
	}
	// The failed passive declare closed the channel.
	if ch, err = conn.Channel(); err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(c.cfg.Queue, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: declaring queue %q: %w", c.cfg.Queue, err)
	}
	return nil
}

// supervise runs the consumers on conn and, when the connection ends,
// dials again with backoff, until Close.
func (c *Collector) supervise(conn *amqp.Connection) {
	defer c.wg.Done()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; {
		if conn != nil {
			c.mu.Lock()
			c.conn = conn
			c.mu.Unlock()
			err := c.consume(conn)
			if c.ctx.Err() != nil {
				// Close acknowledges what is being stored on this
				// connection, then closes it.
				return
			}
			c.mu.Lock()
			c.conn = nil
			c.lostErr = "connection lost: " + errString(err)
			c.mu.Unlock()
			_ = conn.Close()
			conn = nil
			c.log.Warn("connection to RabbitMQ lost; reconnecting", "err", errString(err))
			backoff = 100 * time.Millisecond
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(wait):
		}
		var err error
		if conn, err = c.dial(attempt); err != nil {
			c.mu.Lock()
			c.lostErr = fmt.Sprintf("reconnecting (attempt %d): %v", attempt, err)
			c.mu.Unlock()
			if attempt == 1 || attempt%20 == 0 {
				c.log.Warn("cannot connect to RabbitMQ; retrying", "attempt", attempt, "err", err.Error())
			}
			attempt++
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if err := c.declare(conn); err != nil {
			c.mu.Lock()
			c.lostErr = fmt.Sprintf("reconnected (attempt %d), but cannot declare the queue: %v", attempt, err)
			c.mu.Unlock()
			c.log.Warn("cannot declare the queue; retrying", "err", err.Error())
			_ = conn.Close()
			conn = nil
			attempt++
			continue
		}
		c.log.Info("reconnected to RabbitMQ", "attempts", attempt)
		attempt = 1
		if c.ctx.Err() != nil { // Close ran meanwhile and saw no connection
			_ = conn.Close()
			return
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}

// consume runs the consumers on conn until one of them ends (the
// connection or a channel closed) or Close; it returns why.
func (c *Collector) consume(conn *amqp.Connection) error {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	var wg sync.WaitGroup
	errs := make(chan error, c.cfg.Concurrency)
	for i := range c.cfg.Concurrency {
		ch, err := conn.Channel()
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		if err := ch.Qos(c.prefetch, 0, false); err != nil {
			cancel()
			wg.Wait()
			return err
		}
		tag := "zipkin-rabbitmq." + strconv.Itoa(i)
		deliveries, err := ch.Consume(c.cfg.Queue, tag, false, false, false, false, nil)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.consumer(ctx, ch, tag, deliveries)
		}()
	}
	var err error
	select {
	case e := <-closed:
		if e != nil {
			err = e
		}
	case err = <-errs:
	case <-c.ctx.Done():
	}
	cancel()
	wg.Wait()
	return err
}

// consumer hands deliveries to the queue until ctx ends or the channel
// closes. On ctx's end it cancels the consumer: deliveries not handed on
// are returned to the queue by the broker when the channel closes.
func (c *Collector) consumer(ctx context.Context, ch *amqp.Channel, tag string, deliveries <-chan amqp.Delivery) error {
	for {
		select {
		case <-ctx.Done():
			_ = ch.Cancel(tag, false)
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("the channel closed")
			}
			if !c.handle(ctx, d) {
				_ = ch.Cancel(tag, false)
				return nil
			}
		}
	}
}

// handle hands one delivery to the queue; false means the collector is
// stopping and the delivery was returned (nack, requeue).
func (c *Collector) handle(ctx context.Context, d amqp.Delivery) bool {
	c.inflight.Add(1)
	completed := func(err error) {
		defer c.inflight.Done()
		if errors.Is(err, server.ErrAbandoned) {
			_ = d.Nack(false, true) // not stored: back to the queue
			return
		}
		_ = d.Ack(false) // fails when the channel is gone: the broker delivers it again
	}
	where := "delivery tag " + strconv.FormatUint(d.DeliveryTag, 10)
	switch c.handler.Handle(ctx, d.Body, where, completed) {
	case collector.Skipped:
		completed(nil)
	case collector.Stopped:
		c.inflight.Done()
		_ = d.Nack(false, true)
		return false
	}
	return true
}

// Close stops the consumers, waits until the spans of every delivery
// already queued are stored or given up (or ctx ends), acknowledging them,
// and closes the connection; unacknowledged messages go back to the queue.
// Call it before the server's Close, which drains the ingest queue.
func (c *Collector) Close(ctx context.Context) error {
	c.cancel()
	c.wg.Wait() // the consumers have stopped: no delivery is handed on any more
	drained := make(chan struct{})
	go func() { c.inflight.Wait(); close(drained) }()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = fmt.Errorf("rabbitmq: messages still being stored when Close gave up waiting (%w); they are not acknowledged, so the broker delivers them again", ctx.Err())
	}
	c.closeConn()
	return err
}

// Kill stops the collector as a crash would, for tests: it closes the
// connection at once, without waiting for the messages being stored
// (the broker delivers every unacknowledged one again).
func (c *Collector) Kill() {
	c.cancel()
	c.closeConn()
	c.wg.Wait()
	c.closeConn()
}

func (c *Collector) closeConn() {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}
