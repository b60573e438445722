// Package server is a Zipkin-compatible HTTP server in front of a
// storage.Storage: Zipkin's collector endpoints (POST /api/v2/spans for JSON
// v2 and proto3, POST /api/v1/spans for JSON v1, gzip on both) and its v2
// query API (also under /zipkin/api/v2 for the UI), with Zipkin's status
// codes and messages, CORS as Zipkin allows it by default, and the admin
// endpoints /health, /info and /metrics.
//
// # Ingest with back-pressure
//
// A POST is read (bounded before and after gunzip), decoded and validated
// in the request's goroutine; a bad body is a 400 or 413 and nothing of it
// is stored. Valid spans are sampled, then offered to a queue bounded in
// spans and in bytes, and the request is answered 202. When the queue has no
// room the answer is 503 with a Retry-After header (Config.RetryAfter, 1 s
// by default) and nothing is queued. A fixed set of writer goroutines
// (Config.Writers) drains the queue: each takes what is queued, up to
// Config.BatchSpans, and writes it with one Storage.Accept call, retrying
// any error with backoff until Config.RetryDeadline (2 min by default); a
// batch still failing then is counted (zipkin_collector_batches_failed_total)
// and logged with every trace and span ID. Requests and writers share no
// lock that a writer holds while batching or writing.
//
// Close stops accepting (503) and drains the queue within its context.
//
// docs/server.md describes the endpoints, limits, metrics and defaults.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/spool"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// Defaults of Config.
const (
	DefaultQueryTimeout    = 11 * time.Second
	DefaultWriters         = 2
	DefaultBatchSpans      = 500
	DefaultMaxQueueSpans   = 20_000
	DefaultMaxQueueBytes   = 64 << 20
	DefaultMaxBodyBytes    = 10 << 20
	DefaultRetryDeadline   = 2 * time.Minute
	DefaultAttemptTimeout  = 30 * time.Second
	DefaultRetryAfter      = 1 * time.Second
	DefaultHealthTimeout   = 5 * time.Second
	DefaultBodyReadTimeout = 30 * time.Second
)

// Config configures a Server. Only Storage is required; the zero value of
// every other field is the documented default.
type Config struct {
	// Storage stores and answers spans. Required; storage.Noop{} accepts and
	// drops.
	Storage storage.Storage

	// StorageName names the store in /health, e.g. "MySQLStorage{db:3306/zipkin}".
	// It must not contain a password. Zero value: "storage".
	StorageName string

	// Logger receives the server's structured logs. Zero value: slog.Default().
	Logger *slog.Logger

	// Registerer receives the server's collectors (zipkin_collector_*). Zero
	// value: a new registry, with Go and process collectors, which /metrics
	// then serves.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves. Zero value: the Registerer when it
	// is a Gatherer (the new registry of the zero value included), else
	// prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer

	// QueryTimeout bounds each GET of the query API, as Zipkin's
	// QUERY_TIMEOUT; a query still running then is answered 500. Zero
	// value: 11 s.
	QueryTimeout time.Duration

	// DefaultLookback is the lookback of /traces and /dependencies when the
	// request has none, in milliseconds (Zipkin's QUERY_LOOKBACK). Zero
	// value: one day.
	DefaultLookback int64

	// SampleRate is the fraction of traces the collector keeps, as Zipkin's
	// COLLECTOR_SAMPLE_RATE (debug spans are always kept). Zero value: 1,
	// keep all. Zipkin's 0 (keep only debug spans) is written as a negative
	// value; values above 1 are an error.
	SampleRate float64

	// Writers is how many goroutines write batches to Storage. Zero value:
	// 2. A store that cannot take concurrent writes (the embedded test
	// server) needs 1.
	Writers int
	// BatchSpans is how many spans a writer gathers into one Accept call, at
	// most (one message larger than that is written alone). Zero value: 500.
	BatchSpans int
	// MaxQueueSpans bounds the spans accepted and not yet stored (queued or
	// being written). Zero value: 20 000. A POST with more spans than this
	// is a 413. The queue also holds at most 65 536 POSTs (messages), so
	// that its memory is not reserved up front for a huge bound.
	MaxQueueSpans int
	// MaxQueueBytes bounds the decoded body bytes of those spans. Zero
	// value: 64 MiB; raised to MaxBodyBytes when below it.
	MaxQueueBytes int64
	// MaxBodyBytes bounds a POST body as received and again after gunzip;
	// either above it is a 413. Zero value: 10 MiB (Armeria's default,
	// which Zipkin uses).
	MaxBodyBytes int64
	// MaxConcurrentPosts bounds the POSTs being gunzipped and decoded at
	// once, so that memory and CPU stay bounded under a flood. A POST takes
	// a slot only once its whole body has arrived, so a client that stalls
	// while sending holds none; a POST that finds no slot within a second
	// is answered 503. Zero value: 4 × GOMAXPROCS, at least 8.
	MaxConcurrentPosts int
	// MaxReceivingBytes bounds the body bytes held for POSTs that are
	// still arriving or waiting for a decoding slot, across all requests.
	// A request holds at most twice what it has sent (plus 512 bytes), not
	// what its Content-Length announces; a POST that would take the total
	// above the bound is answered 503 with Retry-After. Zero value:
	// MaxConcurrentPosts × MaxBodyBytes.
	MaxReceivingBytes int64
	// BodyReadTimeout bounds how long a POST may take to send its body; a
	// body still incomplete then is answered 408 and the connection is
	// closed. Zero value: 30 s.
	BodyReadTimeout time.Duration
	// RetryDeadline is how long a writer retries a failing batch, from its
	// first attempt, before giving it up. It is separate from (and not
	// counted in) any request-level retry budget. Zero value: 2 min.
	RetryDeadline time.Duration
	// AttemptTimeout bounds one write attempt. Zero value: 30 s, lowered to
	// RetryDeadline.
	AttemptTimeout time.Duration
	// RetryAfter is the Retry-After of a 503, rounded up to whole seconds.
	// Zero value: 1 s.
	RetryAfter time.Duration

	// SpoolDir, when set, makes every accepted request durable before its
	// 202: the request is written to an append-only log in this directory
	// (package zipkin/spool; group commit, one fsync for many requests),
	// replayed into the queue when the server starts, and trimmed once
	// its spans are stored. A drain that reaches its deadline leaves what
	// is not stored in the log for the next start instead of dropping it.
	// A full log is a 503 with Retry-After. Two servers cannot share one
	// directory. Zero value: no spool (accepted spans live in memory until
	// stored, and a crash loses them).
	SpoolDir string
	// SpoolMaxBytes bounds the log's bytes on disk. Zero value: 1 GiB.
	SpoolMaxBytes int64

	// UI, when set, is mounted at /zipkin/ (the query API under
	// /zipkin/api/v2 takes precedence) and / redirects to it, as in Zipkin.
	UI http.Handler

	// Info is added to the JSON of /info under "zipkin-mysql". It must not
	// contain a password.
	Info map[string]any

	// HealthDetails, when set, is called by every /health request and its
	// entries are added to the storage component's "details" (for a store
	// on several database hosts: each host, up or down). Its strings are
	// redacted like errors. It must be safe for concurrent use and not
	// block. Zero value: none.
	HealthDetails func() map[string]any

	// Redact lists strings (a password) replaced by "****" in every error
	// message the server logs or answers. Empty strings are ignored.
	Redact []string

	// now is the clock of /traces' default endTs; tests set it.
	now func() time.Time
}

// resolvedIngest is the ingest part of a Config with defaults applied.
type resolvedIngest struct {
	writers, batchSpans, maxSpans int
	maxBytes, maxBody             int64
	maxPosts                      int
	maxReceiving                  int64
	bodyTimeout                   time.Duration
	retryDeadline, attemptTimeout time.Duration
	backoffBase, backoffMax       time.Duration
	retryAfter                    time.Duration
	redact                        func(string) string
}

// Server is a Zipkin HTTP server. Create one with New; serve Handler; call
// Close after the HTTP server has stopped accepting requests.
type Server struct {
	cfg    Config
	ingest resolvedIngest
	store  storage.Storage
	log    *slog.Logger
	m      *collectorMetrics
	http   *Transport // the span endpoints' entry point (transport="http")
	q      *ingestQueue
	posts  chan struct{} // semaphore of POSTs being decoded
	// receiving is the body bytes reserved by POSTs being received or
	// waiting for a decoding slot; at most ingest.maxReceiving.
	receiving atomic.Int64
	sampler   sampler
	reg       prometheus.Registerer
	gather    prometheus.Gatherer
	handler   http.Handler

	// manyNames is set when the last /services returned more than three
	// names: name endpoints then send Cache-Control, as Zipkin does.
	manyNames atomic.Bool
	closing   atomic.Bool

	spool      *spool.Spool  // nil without Config.SpoolDir
	replayDone chan struct{} // closed when the replay at start has ended; nil without one

	transportsMu sync.Mutex
	transports   []string // names given to Transport, in order, for the index page

	checksMu sync.Mutex
	checks   []healthCheck // AddHealthCheck's, in order
}

// New checks cfg, starts the writers and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Storage == nil {
		return nil, errors.New("server: Config.Storage is nil; use storage.Noop{} to accept and drop")
	}
	if cfg.SampleRate > 1 {
		return nil, fmt.Errorf("server: SampleRate %v is above 1; use a value in (0, 1], or a negative value to keep only debug spans", cfg.SampleRate)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Writers", int64(cfg.Writers)}, {"BatchSpans", int64(cfg.BatchSpans)}, {"MaxQueueSpans", int64(cfg.MaxQueueSpans)},
		{"MaxQueueBytes", cfg.MaxQueueBytes}, {"MaxBodyBytes", cfg.MaxBodyBytes}, {"MaxConcurrentPosts", int64(cfg.MaxConcurrentPosts)}, {"MaxReceivingBytes", cfg.MaxReceivingBytes},
		{"BodyReadTimeout", int64(cfg.BodyReadTimeout)}, {"RetryDeadline", int64(cfg.RetryDeadline)}, {"AttemptTimeout", int64(cfg.AttemptTimeout)},
		{"RetryAfter", int64(cfg.RetryAfter)}, {"SpoolMaxBytes", cfg.SpoolMaxBytes}, {"QueryTimeout", int64(cfg.QueryTimeout)}, {"DefaultLookback", cfg.DefaultLookback},
	} {
		if f.v < 0 {
			return nil, fmt.Errorf("server: Config.%s is negative (%d); use 0 for the default", f.name, f.v)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StorageName == "" {
		cfg.StorageName = "storage"
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.DefaultLookback == 0 {
		cfg.DefaultLookback = model.DefaultLookback
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	in := resolvedIngest{
		writers:        orInt(cfg.Writers, DefaultWriters),
		batchSpans:     orInt(cfg.BatchSpans, DefaultBatchSpans),
		maxSpans:       orInt(cfg.MaxQueueSpans, DefaultMaxQueueSpans),
		maxBytes:       or64(cfg.MaxQueueBytes, DefaultMaxQueueBytes),
		maxBody:        or64(cfg.MaxBodyBytes, DefaultMaxBodyBytes),
		maxPosts:       orInt(cfg.MaxConcurrentPosts, max(8, 4*runtime.GOMAXPROCS(0))),
		bodyTimeout:    orDur(cfg.BodyReadTimeout, DefaultBodyReadTimeout),
		retryDeadline:  orDur(cfg.RetryDeadline, DefaultRetryDeadline),
		attemptTimeout: orDur(cfg.AttemptTimeout, DefaultAttemptTimeout),
		retryAfter:     orDur(cfg.RetryAfter, DefaultRetryAfter),
		backoffBase:    100 * time.Millisecond,
		// A writer's wait between attempts is at most 250 ms, so
		// that a batch caught in a database restart is written within
		// that of the database's return. It does not hammer a database
		// that is down: an attempt then waits in the pool's acquire.
		backoffMax: 250 * time.Millisecond,
		redact:     redactor(cfg.Redact),
	}
	in.attemptTimeout = min(in.attemptTimeout, in.retryDeadline)
	in.maxReceiving = or64(cfg.MaxReceivingBytes, int64(in.maxPosts)*in.maxBody)
	in.maxBytes = max(in.maxBytes, in.maxBody)

	s := &Server{
		cfg:     cfg,
		ingest:  in,
		store:   cfg.Storage,
		log:     cfg.Logger,
		m:       newCollectorMetrics(),
		posts:   make(chan struct{}, in.maxPosts),
		sampler: newSampler(cfg.SampleRate),
	}
	s.http = &Transport{s: s, name: "http", m: s.m}
	reg := cfg.Registerer
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg = r
	}
	s.reg = reg
	s.gather = cfg.Gatherer
	if s.gather == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			s.gather = g
		} else {
			s.gather = prometheus.DefaultGatherer
		}
	}
	var replay []spool.Record
	if cfg.SpoolDir != "" {
		sp, err := spool.Open(spool.Options{Dir: cfg.SpoolDir, MaxBytes: cfg.SpoolMaxBytes, Logger: cfg.Logger}, func(r spool.Record) {
			replay = append(replay, r)
		})
		if err != nil {
			return nil, err
		}
		s.spool = sp
	}
	s.q = newIngestQueue(in, cfg.Storage, cfg.Logger, s.m, s.spool)
	collectorsOf := append(s.m.all, queueGauges(s.q)...)
	if s.spool != nil {
		collectorsOf = append(collectorsOf, spoolGauges(s.spool)...)
	}
	for _, c := range collectorsOf {
		if err := reg.Register(c); err != nil {
			_ = s.q.close(context.Background())
			if s.spool != nil {
				_ = s.spool.Close()
			}
			return nil, fmt.Errorf("server: registering metrics: %w (is another Server registered in the same registry?)", err)
		}
	}
	if len(replay) > 0 {
		s.replayDone = make(chan struct{})
		go s.replay(replay)
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// QueueDepth returns the spans accepted and not yet stored or given up, and
// their bytes (the zipkin_collector_queue_* gauges).
func (s *Server) QueueDepth() (spans, bytes int64) { return s.q.spans.Load(), s.q.bytes.Load() }

// Close stops accepting spans (POSTs are answered 503 from now on) and
// waits until the writers have stored or given up every queued span, or ctx
// ends; then it abandons what is left, counts and logs it, and returns an
// error saying how many spans were dropped. Call it after the HTTP server
// stopped accepting requests (http.Server.Shutdown).
//
// With a spool (Config.SpoolDir), what is not stored when ctx ends stays
// in the spool for the next start, and Close returns nil.
func (s *Server) Close(ctx context.Context) error {
	s.closing.Store(true)
	if s.replayDone != nil {
		<-s.replayDone
	}
	err := s.q.close(ctx)
	if s.spool != nil {
		_ = s.spool.Close()
	}
	return err
}

// replay queues the requests the spool held at start, waiting for room in
// the queue, until every one is queued or the server closes (the rest
// stay in the spool).
func (s *Server) replay(recs []spool.Record) {
	defer close(s.replayDone)
	var spans int
	for i, r := range recs {
		rec, err := parseSpoolRecord(r.Payload)
		if err != nil {
			s.spool.Done(r.Seq)
			continue
		}
		decoded, err := rec.decode()
		if err != nil {
			s.log.Error("spool: a replayed request does not decode; skipped", "seq", r.Seq, "err", err)
			s.spool.Done(r.Seq)
			continue
		}
		body := rec.body
		kept := s.sampler.filter(decoded)
		if len(kept) == 0 {
			s.spool.Done(r.Seq)
			continue
		}
		seq := r.Seq
		for {
			if s.closing.Load() {
				s.log.Warn("spool: server closing; requests not yet replayed stay in the spool", "left", len(recs)-i)
				return
			}
			err := s.q.offerDurable(message{spans: kept, bytes: int64(len(body))}, func() (uint64, error) { return seq, nil })
			if err == nil {
				break
			}
			if errors.Is(err, errClosing) {
				return
			}
			time.Sleep(10 * time.Millisecond) // the queue is full: wait for the writers
		}
		spans += len(kept)
	}
	s.log.Info("spool: replayed the requests accepted before the last stop", "requests", len(recs), "spans", spans)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v2/spans", s.postSpans(v2Endpoint))
	mux.HandleFunc("POST /api/v1/spans", s.postSpans(v1Endpoint))
	for _, base := range []string{"/api/v2", "/zipkin/api/v2"} {
		mux.HandleFunc("GET "+base+"/services", s.query(s.getServices))
		mux.HandleFunc("GET "+base+"/spans", s.query(s.getSpanNames))
		mux.HandleFunc("GET "+base+"/remoteServices", s.query(s.getRemoteServices))
		mux.HandleFunc("GET "+base+"/traces", s.query(s.getTraces))
		mux.HandleFunc("GET "+base+"/trace/{traceId}", s.query(s.getTrace))
		mux.HandleFunc("GET "+base+"/traceMany", s.query(s.getTraceMany))
		mux.HandleFunc("GET "+base+"/dependencies", s.query(s.getDependencies))
		mux.HandleFunc("GET "+base+"/autocompleteKeys", s.query(s.getAutocompleteKeys))
		mux.HandleFunc("GET "+base+"/autocompleteValues", s.query(s.getAutocompleteValues))
	}
	for _, p := range []string{"/health", "/actuator/health"} {
		mux.HandleFunc("GET "+p, s.health)
	}
	for _, p := range []string{"/info", "/actuator/info"} {
		mux.HandleFunc("GET "+p, s.info)
	}
	metricsHandler := promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{})
	for _, p := range []string{"/metrics", "/prometheus", "/actuator/prometheus"} {
		mux.Handle("GET "+p, metricsHandler)
	}
	// The UI mount point: Config.UI (zipkin/ui's ui.Handler()) at /zipkin/.
	if s.cfg.UI != nil {
		mux.Handle("/zipkin/", s.cfg.UI)
		mux.Handle("GET /{$}", http.RedirectHandler("/zipkin/", http.StatusFound))
	} else {
		mux.HandleFunc("GET /{$}", s.index)
	}
	return s.common(mux)
}

// common answers TRACE with 405 everywhere and applies CORS to the API.
func (s *Server) common(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodTrace {
			w.Header().Set("Allow", "GET, HEAD, POST, OPTIONS")
			textError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/zipkin/api/") {
			if cors(w, r) {
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cors implements Zipkin's default CORS policy (any origin; GET and POST;
// the Content-Type request header). It answers a preflight request itself
// and reports true then.
func cors(w http.ResponseWriter, r *http.Request) (handled bool) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	reqMethod := r.Header.Get("Access-Control-Request-Method")
	if r.Method != http.MethodOptions || reqMethod == "" {
		h.Set("Access-Control-Allow-Origin", "*")
		return false
	}
	if reqMethod != http.MethodGet && reqMethod != http.MethodPost {
		textError(w, http.StatusForbidden, "CORS request rejected: method "+reqMethod+" is not allowed")
		return true
	}
	for _, hdr := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		hdr = strings.ToLower(strings.TrimSpace(hdr))
		if hdr != "" && hdr != "content-type" && hdr != "content-encoding" {
			textError(w, http.StatusForbidden, "CORS request rejected: header "+hdr+" is not allowed")
			return true
		}
	}
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET,POST")
	h.Set("Access-Control-Allow-Headers", "content-type,content-encoding")
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusOK)
	return true
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, "Zipkin-compatible span server (sqlpool).\n\n"+
		"POST /api/v2/spans   JSON v2 or proto3 spans (gzip ok)\n"+
		"POST /api/v1/spans   JSON v1 spans\n"+
		"GET  /api/v2/services, /spans, /remoteServices, /traces, /trace/{id}, /traceMany,\n"+
		"     /dependencies, /autocompleteKeys, /autocompleteValues\n"+
		"GET  /health, /info, /metrics\n")
	s.transportsMu.Lock()
	names := slices.Clone(s.transports)
	s.transportsMu.Unlock()
	if len(names) > 0 {
		fmt.Fprintf(w, "\nOther collectors (the transport label of zipkin_collector_*): %s\n", strings.Join(names, ", "))
	}
}

// textError writes a text/plain error body, as Zipkin's
// BodyIsExceptionMessage does.
func textError(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

func redactor(secrets []string) func(string) string {
	var pairs []string
	for _, s := range secrets {
		if s != "" {
			pairs = append(pairs, s, "****")
		}
	}
	if len(pairs) == 0 {
		return func(s string) string { return s }
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}

func orInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func or64(v, d int64) int64 {
	if v == 0 {
		return d
	}
	return v
}

func orDur(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}
