// Command zipkin-mysql is a Zipkin-compatible span server on MySQL or
// MariaDB, with sqlpool as its connection pool: Zipkin's HTTP API on :9411,
// Zipkin's MySQL schema, Zipkin's environment variables.
//
//	go run ./app/cmd/zipkin-mysql                          # try it: in memory, data lost on exit
//	MYSQL_HOST=db MYSQL_USER=zipkin MYSQL_PASS=… go run ./app/cmd/zipkin-mysql
//	go run ./app/cmd/zipkin-mysql -dsn 'zipkin:…@tcp(db:3306)/zipkin' -init-schema
//	go run ./app/cmd/zipkin-mysql -storage=embedded        # the MySQL code path on an in-process server
//
// Without -storage, STORAGE_TYPE, -dsn, MYSQL_JDBC_URL or any MYSQL_HOST,
// MYSQL_TCP_PORT, MYSQL_DB, MYSQL_USER, MYSQL_PASS, MYSQL_USE_SSL, it
// stores spans in memory, as Zipkin's server does by default
// (STORAGE_TYPE=mem): the newest MEM_MAX_SPANS spans (500,000 by default),
// the oldest traces evicted whole past that; for trying out, not for
// keeping data. docs/server.md has every option.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"database/sql/driver"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sqlpool/sqlpool/app/embedded"
	"github.com/sqlpool/sqlpool/app/zipkin/memstore"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
	"github.com/sqlpool/sqlpool/app/zipkin/ui"
	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/metrics"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/otelpool"
	"github.com/sqlpool/sqlpool/pool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "zipkin-mysql:", err)
		}
		os.Exit(1)
	}
}

// errUsage is a flag error already printed by the flag package.
var errUsage = errors.New("usage")

// startError is a start-up failure: one line saying what happened and what
// to do.
type startError struct{ msg string }

func (e *startError) Error() string { return e.msg }

// run is the command. It returns when ctx ends (SIGTERM) after draining, or
// at once with a start-up error. ready, when non-nil, receives the address
// the server listens on.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready chan<- string) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) || strings.HasPrefix(err.Error(), "flag provided but not defined") ||
			strings.HasPrefix(err.Error(), "invalid value") {
			return errUsage // the flag package printed it with the usage
		}
		return err
	}
	ccfg, err := parseCollectorConfig(getenv)
	if err != nil {
		return err
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(h)
	redact := redactor(cfg.Password())
	for _, w := range cfg.Warnings {
		log.Warn(redact(w))
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return &startError{fmt.Sprintf("cannot listen on %s (%v): stop the process using it, or pass -listen (or set QUERY_PORT) with a free address", cfg.Listen, err)}
	}
	defer ln.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	stc, err := parseSelfTracing(getenv)
	if err != nil {
		return err
	}
	var self *selfTracing // SELF_TRACING_ENABLED (selftrace.go)
	if stc.Enabled {
		if self, err = newSelfTracing(stc, log); err != nil {
			return &startError{err.Error()}
		}
	}
	st, err := openStorage(ctx, cfg, log, reg, self)
	if err != nil {
		return &startError{redact(err.Error())}
	}
	defer st.close()
	serverStore := st.store
	if self != nil {
		self.setStorage(st.store)
		serverStore = self.wrap(st.store)
		defer func() { // before st.close: the last spans go into the storage
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			self.shutdown(sctx)
		}()
	}
	stopPprof, err := startPprof(cfg.Pprof, log)
	if err != nil {
		return &startError{err.Error()}
	}
	defer stopPprof()
	stopRetention, err := startRetention(cfg, st, log, reg)
	if err != nil {
		return &startError{err.Error()}
	}
	defer stopRetention()
	stopDeps, err := startDependencyAggregation(st, log, reg)
	if err != nil {
		return &startError{err.Error()}
	}
	defer stopDeps()
	if err := registerStoreStats(st, reg); err != nil {
		return &startError{err.Error()}
	}

	maxConns := cfg.MaxConns
	if cfg.Embedded {
		maxConns = 1 // see openStorage
	}
	writers := cfg.Writers
	if writers == 0 {
		writers = min(4, max(1, cfg.MaxConns/2))
		if cfg.Embedded {
			// The embedded server has one connection (see openStorage).
			writers = 1
		}
	}
	var batchSpans int
	var retryDeadline, attemptTimeout time.Duration
	if cfg.Embedded {
		batchSpans, retryDeadline, attemptTimeout = embeddedBatchSpans, embeddedRetryDeadline, embeddedAttemptTimeout
	}
	srv, err := server.New(server.Config{
		Storage:         serverStore,
		StorageName:     st.name,
		Logger:          log,
		Registerer:      reg,
		Gatherer:        st.gatherers(reg),
		DefaultLookback: cfg.Lookback,
		SampleRate:      zipkinRate(cfg.SampleRate),
		Writers:         writers,
		BatchSpans:      batchSpans,
		RetryDeadline:   retryDeadline,
		AttemptTimeout:  attemptTimeout,
		MaxQueueSpans:   cfg.QueueSpans,
		MaxQueueBytes:   cfg.QueueBytes,
		SpoolDir:        cfg.SpoolDir,
		SpoolMaxBytes:   cfg.SpoolMaxBytes,
		Redact:          []string{cfg.Password()},
		HealthDetails:   st.healthDetails,
		Info: map[string]any{
			"storage":               cfg.Storage,
			"storageSource":         cfg.StorageSource,
			"database":              cfg.Addr(),
			"user":                  st.user,
			"dsnSource":             cfg.DSNSource,
			"pool":                  cfg.Pool,
			"maxConnections":        maxConns,
			"writers":               writers,
			"strictTraceId":         cfg.StrictTraceID,
			"searchEnabled":         cfg.SearchEnabled,
			"autocompleteKeys":      append([]string{}, cfg.AutocompleteKeys...), // [] when none, not null
			"sampleRate":            cfg.SampleRate,
			"spool":                 cfg.SpoolDir != "",
			"hosts":                 hostsInfo(cfg),
			"hostStrategy":          hostStrategyInfo(cfg),
			"dependencyAggregation": st.mysql != nil && st.mysql.DependencyAggregation(),
			"selfTracing":           stc.Enabled,
		},
		// The trace viewer at /zipkin/; / redirects there.
		UI: ui.Handler(),
	})
	if err != nil {
		return &startError{err.Error()}
	}
	stopBrokers, err := startBrokers(cfg.Brokers, srv, log, reg)
	if err != nil {
		_ = srv.Close(context.Background())
		return &startError{redactor(cfg.Brokers.rabbitSecret())(redact(err.Error()))}
	}
	defer func() { _ = stopBrokers(context.Background()) }()

	cols, err := startCollectors(ccfg, srv, ln.Addr().String(), log)
	if err != nil {
		_ = srv.Close(context.Background())
		return &startError{err.Error()}
	}
	defer cols.close()
	hs := &http.Server{
		Handler:           cols.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(h, slog.LevelWarn),
	}
	if cols.h2c { // gRPC (zipkin.proto3.SpanService) on the HTTP port
		hs.Protocols = new(http.Protocols)
		hs.Protocols.SetHTTP1(true)
		hs.Protocols.SetUnencryptedHTTP2(true)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	addr := ln.Addr().String()
	url := "http://" + displayAddr(addr)
	fmt.Fprintf(stdout, "zipkin-mysql listening on %s (storage: %s, pool: %s)\n", url, st.name, cfg.Pool)
	switch {
	case cfg.Embedded:
		fmt.Fprintln(stdout, "embedded MySQL-protocol server: for trying out; spans are lost when the process exits")
	case cfg.Storage == "memory":
		fmt.Fprintf(stdout, "in-memory storage: for trying out; it keeps the newest %d spans (MEM_MAX_SPANS) and evicts the oldest traces past that; spans are lost when the process exits\n", cfg.MemMaxSpans)
	}
	fmt.Fprintf(stdout, "send a first span:\n  %s\nread it back:\n  curl -s '%s/api/v2/traces?lookback=3600000'\n", firstSpanCurl(url), url)
	if cols.otlpAddr != "" {
		fmt.Fprintf(stdout, "OTLP/gRPC listening on %s\n", cols.otlpAddr)
	}
	collectors := []any{"otlp_http", ccfg.OTLPHTTP, "grpc", ccfg.GRPC, "otlp_grpc", cols.otlpAddr}
	if cfg.Storage == "memory" {
		log.Info("listening", append([]any{"addr", addr, "storage", st.name, "storage_source", cfg.StorageSource, "writers", writers,
			"mem_max_spans", cfg.MemMaxSpans, "when_full", "evicts the oldest traces", "durable", false}, collectors...)...)
	} else {
		log.Info("listening", append([]any{"addr", addr, "storage", st.name, "storage_source", cfg.StorageSource, "pool", cfg.Pool, "writers", writers}, collectors...)...)
	}
	if ready != nil {
		ready <- addr
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("HTTP server stopped: %w", err)
	}
	log.Info("stopping: no new requests; draining the span queue", "deadline", cfg.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	_ = hs.Shutdown(dctx)
	cols.stop(dctx)
	// The message-queue collectors stop first: they wait for what they
	// queued to be stored, and acknowledge it, while the writers still run.
	if err := stopBrokers(dctx); err != nil {
		log.Warn("message-queue collectors stopped with messages unacknowledged (the broker delivers them again)", "err", err)
	}
	if err := srv.Close(dctx); err != nil {
		log.Error("drain incomplete", "err", err)
		return err
	}
	if cfg.SpoolDir != "" {
		log.Info("stopped; every accepted span was written or stays in the spool", "spool_dir", cfg.SpoolDir)
		return nil
	}
	log.Info("stopped; every accepted span was written")
	return nil
}

// Write settings of the embedded server. go-mysql-server's in-memory
// engine (v0.20) gets slower with the rows of one transaction and with the
// rows already in a table: it re-sorts every secondary index of a table at
// the end of each statement and checks unique keys by scanning the table.
// Measured on 2 shared cores, spans of 8 tags (about 10 rows each) into an
// empty store: 200 rows 0.08 s, 850 rows 1.0 s, 1,850 rows 6.4 s in one
// transaction; 200 rows take 1.1 s once 2,000 rows are stored and 2.7 s at
// 10,000. So the embedded server writes batches of at most 25 spans in
// transactions of at most 250 rows (the single connection is free for
// reads in between), gives each attempt 2 minutes, and never gives a batch
// up while the process runs: the spans exist only in this process, so
// dropping them gains nothing, and the bounded queue turns a slow engine
// into 503s for new spans instead.
const (
	embeddedMaxTxRows      = 250
	embeddedBatchSpans     = 25
	embeddedAttemptTimeout = 2 * time.Minute
	embeddedRetryDeadline  = 100 * 365 * 24 * time.Hour
)

// embeddedTxRows is mysqlstore.Options.MaxTxRows: embeddedMaxTxRows on the
// embedded server, else 0 (one transaction per batch).
func embeddedTxRows(embedded bool) int {
	if embedded {
		return embeddedMaxTxRows
	}
	return 0
}

// zipkinRate converts COLLECTOR_SAMPLE_RATE to server.Config.SampleRate,
// where Zipkin's 0 (keep only debug spans) is a negative value.
func zipkinRate(r float64) float64 {
	if r == 0 {
		return -1
	}
	return r
}

// displayAddr turns ":9411" or "[::]:9411" into "localhost:9411" for
// printing.
func displayAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// firstSpanBody is the span README's curl sends (timestamp in µs is filled
// in when printed, so that the default lookback finds it).
const firstSpanBody = `[{"traceId":"5af7183fb1d4cf5f","id":"6b221d5bc9e6496c","name":"get /api","timestamp":%d,"duration":1200,"kind":"SERVER","localEndpoint":{"serviceName":"frontend","ipv4":"127.0.0.1"},"tags":{"http.method":"GET","http.path":"/api"}}]`

func firstSpanCurl(url string) string {
	body := fmt.Sprintf(firstSpanBody, time.Now().UnixMicro())
	return fmt.Sprintf("curl -s -X POST %s/api/v2/spans -H 'Content-Type: application/json' -d '%s'", url, body)
}

// openedStorage is the store with what closing it takes.
type openedStorage struct {
	store storage.Storage
	mysql *mysqlstore.Store // nil unless the storage is mysql or embedded
	mem   *memstore.Store   // nil unless the storage is memory
	name  string            // for /health: no password
	user  string
	// hosts is the cluster connector of a store on several database
	// hosts (nil for one host): /health shows each host.
	hosts *cluster.Connector
	// gatherer, when set, has the pool's metrics (and the per-host
	// families), gathered by /metrics next to the command's registry.
	gatherer prometheus.Gatherer
	close    func()
}

// gatherers is what /metrics serves: reg, plus the storage's own.
func (st *openedStorage) gatherers(reg *prometheus.Registry) prometheus.Gatherer {
	if st.gatherer == nil {
		return reg
	}
	return prometheus.Gatherers{reg, st.gatherer}
}

// healthDetails lists each database host for /health: its name, whether
// it is up, the pool's connections on it and, while down, since when and
// why.
func (st *openedStorage) healthDetails() map[string]any {
	if st.hosts == nil {
		return nil
	}
	var hosts []any
	up := 0
	for _, h := range st.hosts.Hosts() {
		d := map[string]any{"host": h.Name, "status": "UP", "connections": h.Conns.Total, "active": h.Conns.Active}
		if h.Up {
			up++
		} else {
			d["status"] = "DOWN"
			if !h.DownSince.IsZero() {
				d["downSince"] = h.DownSince.UTC().Format(time.RFC3339)
			}
			if h.LastError != nil {
				d["error"] = h.LastError.Error()
			}
		}
		hosts = append(hosts, d)
	}
	return map[string]any{"hosts": hosts, "hostsUp": up, "strategy": st.hosts.Strategy().String()}
}

// openStorage connects to the database (retrying what may pass within
// -connect-timeout), creates the schema when asked (always on the embedded
// server) and opens the store. Errors say what to do.
func openStorage(ctx context.Context, cfg *config, log *slog.Logger, reg *prometheus.Registry, self *selfTracing) (*openedStorage, error) {
	if cfg.Storage == "none" {
		return &openedStorage{store: storage.Noop{}, name: "NoopStorage", close: func() {}}, nil
	}
	if cfg.Storage == "postgres" {
		return openPostgres(ctx, cfg, log, reg)
	}
	if cfg.Storage == "memory" {
		var warned atomic.Bool
		st := memstore.New(memstore.Options{
			MaxSpans:             cfg.MemMaxSpans,
			DisableStrictTraceID: !cfg.StrictTraceID,
			DisableSearch:        !cfg.SearchEnabled,
			AutocompleteKeys:     append([]string(nil), cfg.AutocompleteKeys...),
			OnEvict: func(traces, spans int) {
				if !warned.Swap(true) {
					log.Warn("in-memory storage full: evicting the oldest traces (counted in zipkin_storage_memory_evicted_spans_total); raise MEM_MAX_SPANS or use MySQL to keep more",
						"mem_max_spans", cfg.MemMaxSpans, "traces", traces, "spans", spans)
				}
			},
		})
		return &openedStorage{store: st, mem: st, name: "InMemoryStorage", close: func() {}}, nil
	}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	mcfg := cfg.MySQL
	initSchema := cfg.InitSchema
	if cfg.Embedded {
		dsn, stop, err := embedded.Start()
		if err != nil {
			return nil, fmt.Errorf("starting the embedded MySQL-protocol server: %w", err)
		}
		closers = append(closers, func() { _ = stop() })
		if mcfg, err = mysql.ParseDSN(dsn); err != nil {
			closeAll()
			return nil, err
		}
		initSchema = true
	}
	// The driver's own log lines go to the structured log, and not at all
	// while probing: a start-up failure is the one line probe returns.
	dlog := &driverLogger{log: log}
	dlog.quiet.Store(true)
	mcfg = mcfg.Clone()
	mcfg.Logger = dlog
	var (
		connector  driver.Connector
		connectors []driver.Connector // one per host, for the start-up probe
		cc         *cluster.Connector
	)
	if len(cfg.Hosts) > 1 && !cfg.Embedded {
		if cfg.Pool != "sqlpool" {
			closeAll()
			return nil, fmt.Errorf("%s names %d database hosts, which needs -pool=sqlpool (its cluster connector); -pool=%s has one host only", cfg.DSNSource, len(cfg.Hosts), cfg.Pool)
		}
		hosts := make([]cluster.Host, 0, len(cfg.Hosts))
		for _, addr := range cfg.Hosts {
			hcfg := mcfg.Clone()
			hcfg.Addr = addr
			hc, err := mysql.NewConnector(hcfg)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("%s: host %s: %w", cfg.DSNSource, addr, err)
			}
			hosts = append(hosts, cluster.Host{Name: addr, Connector: hc})
			connectors = append(connectors, hc)
		}
		ccfg := cluster.Config{Hosts: hosts, Strategy: cfg.HostStrategy, Logger: log}
		if cfg.Galera {
			ccfg.Ready = cluster.GaleraReady
		}
		var err error
		if cc, err = cluster.New(ccfg); err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: %w", cfg.DSNSource, err)
		}
		connector = cc
		log.Info("zipkin-mysql: several database hosts", "hosts", strings.Join(cfg.Hosts, ","),
			"strategy", cfg.HostStrategy.String(), "from", cfg.HostMode, "galera_ready_check", cfg.Galera)
	} else {
		c, err := mysql.NewConnector(mcfg)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: %w", cfg.DSNSource, err)
		}
		connector, connectors = c, []driver.Connector{c}
	}
	if err := probe(ctx, connectors, cfg, mcfg); err != nil {
		closeAll()
		return nil, err
	}
	dlog.quiet.Store(false)

	maxConns := cfg.MaxConns
	if cfg.Embedded {
		// go-mysql-server's in-memory engine puts back, when a statement's
		// transaction commits, its snapshot of every table the statement
		// read: a SELECT overlapping another connection's COMMIT reverts
		// that commit. One connection runs every statement in turn.
		maxConns = 1
	}
	var db, readDB *sql.DB // readDB: the replicas' (MYSQL_READ_REPLICAS), or nil
	var poolGatherer prometheus.Gatherer
	switch cfg.Pool {
	case "database-sql":
		db = sql.OpenDB(connector)
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		closers = append(closers, func() { _ = db.Close() })
	default:
		m, err := metrics.New(metrics.Options{})
		if err != nil {
			closeAll()
			return nil, err
		}
		events := m.Trace()
		if self != nil { // the pool's acquire spans (otelpool), the Prometheus metrics behind them
			tel, err := otelpool.New(otelpool.Options{TracerProvider: self.tracerProvider(), Next: events})
			if err != nil {
				closeAll()
				return nil, err
			}
			events = tel.Trace()
		}
		p, err := pool.New(connector, pool.Config{
			Name:                      "zipkin",
			MaxConns:                  maxConns,
			InitializationFailTimeout: cfg.ConnectTimeout,
			ConnectTimeout:            cfg.ConnectTimeout,
			Trace:                     events,
			Logger:                    log,
		})
		if err != nil {
			closeAll()
			return nil, explain(err, cfg, mcfg)
		}
		closers = append(closers, func() { _ = p.Close() })
		if err := m.Register(p); err != nil {
			closeAll()
			return nil, err
		}
		if cc != nil {
			// The per-host families live in m's own registry (with m), which
			// /metrics then gathers next to reg.
			if err := m.RegisterHosts(cc); err != nil {
				closeAll()
				return nil, err
			}
			poolGatherer = m.Registry()
		} else if err := reg.Register(m); err != nil {
			closeAll()
			return nil, err
		}
		pdb := p.OpenDB()
		closers = append(closers, func() { _ = pdb.Close() })
		w, r, err := openReadReplicas(cfg, mcfg, p, pdb, maxConns, log, reg, &closers)
		if err != nil {
			closeAll()
			return nil, err
		}
		db, readDB = w, r
	}

	sctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout+30*time.Second)
	defer cancel()
	if initSchema {
		if err := mysqlstore.CreateSchema(sctx, db); err != nil {
			closeAll()
			return nil, fmt.Errorf("%v: check that user %q may CREATE TABLE in %q", explain(err, cfg, mcfg), mcfg.User, mcfg.DBName)
		}
	}
	var keys []string
	keys = append(keys, cfg.AutocompleteKeys...)
	store, err := mysqlstore.Open(sctx, db, mysqlstore.Options{
		DisableStrictTraceID: !cfg.StrictTraceID,
		DisableSearch:        !cfg.SearchEnabled,
		AutocompleteKeys:     keys,
		Logger:               log,
		MaxTxRows:            embeddedTxRows(cfg.Embedded),

		DisableDependencyAggregation: !cfg.AggregateDependencies,
		ReadDB:                       readDB,
	})
	if err != nil {
		closeAll()
		if errors.Is(err, mysqlstore.ErrNoSchema) {
			return nil, fmt.Errorf("the Zipkin tables are missing in database %q at %s: run once with -init-schema (or load Zipkin's mysql.sql)", mcfg.DBName, mcfg.Addr)
		}
		return nil, explain(err, cfg, mcfg)
	}
	if cfg.BackfillDependencies {
		if !store.DependencyAggregation() {
			closeAll()
			return nil, errors.New("-backfill-dependencies needs the dependency aggregator: run with -init-schema to create its tables, and do not set MYSQL_AGGREGATE_DEPENDENCIES=false")
		}
		t0 := time.Now()
		n, err := store.BackfillDependencies(ctx)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("-backfill-dependencies: %v", explain(err, cfg, mcfg))
		}
		log.Info("zipkin-mysql: dependencies backfilled from the stored spans", "traces", n, "took", time.Since(t0).Round(time.Millisecond))
	}
	name := "MySQLStorage{" + mcfg.Addr + "/" + mcfg.DBName + "}"
	if cc != nil {
		name = "MySQLStorage{" + strings.Join(cfg.Hosts, ",") + "/" + mcfg.DBName + "}"
	}
	if cfg.Embedded {
		name = "MySQLStorage{embedded " + mcfg.Addr + "}"
	}
	return &openedStorage{store: store, mysql: store, name: name, user: mcfg.User, hosts: cc, gatherer: poolGatherer, close: closeAll}, nil
}

// hostsInfo is /info's list of database hosts ([] for one host or none).
func hostsInfo(cfg *config) []string { return append([]string{}, cfg.Hosts...) }

// hostStrategyInfo is /info's host strategy ("" for one host or none).
func hostStrategyInfo(cfg *config) string {
	if len(cfg.Hosts) < 2 {
		return ""
	}
	return cfg.HostStrategy.String() + " (" + cfg.HostMode + ")"
}

// driverLogger is go-sql-driver/mysql's logger: its messages become
// warnings of the command's structured log, or are dropped while quiet.
type driverLogger struct {
	log   *slog.Logger
	quiet atomic.Bool
}

func (l *driverLogger) Print(v ...any) {
	if !l.quiet.Load() {
		l.log.Warn("mysql driver: " + strings.TrimSpace(fmt.Sprint(v...)))
	}
}

// probe opens and closes one connection, retrying errors that may pass
// (refused, timeouts, too many connections) until -connect-timeout, and
// failing at once on those that will not (access denied, unknown database,
// TLS). With several hosts (one connector each) one host answering is
// enough: the cluster connector serves from the hosts that are up and
// takes the others back when they answer.
func probe(ctx context.Context, connectors []driver.Connector, cfg *config, mcfg *mysql.Config) error {
	deadline := time.Now().Add(cfg.ConnectTimeout)
	for {
		var err error
		for i, connector := range connectors {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			conn, cerr := connector.Connect(pctx)
			cancel()
			if cerr == nil {
				return conn.Close()
			}
			if i == 0 || err == nil {
				err = cerr
			}
			if permanent(cerr) {
				err = cerr
				break
			}
		}
		if permanent(err) || time.Now().Add(500*time.Millisecond).After(deadline) || ctx.Err() != nil {
			return explain(err, cfg, mcfg)
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func permanent(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, 1045, 1049, 1251, 1698:
			return true
		}
	}
	var ce *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	return errors.Is(err, mysql.ErrNoTLS) || errors.As(err, &ce) || errors.As(err, &ue) || errors.As(err, &he)
}

// explain turns a connection error into one line saying what to do.
func explain(err error, cfg *config, mcfg *mysql.Config) error {
	where := mcfg.Addr
	var me *mysql.MySQLError
	var ce *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case errors.As(err, &me) && (me.Number == 1045 || me.Number == 1698):
		return fmt.Errorf("MySQL at %s refused user %q (%v): check MYSQL_USER/MYSQL_PASS or the credentials in %s", where, mcfg.User, me, cfg.DSNSource)
	case errors.As(err, &me) && me.Number == 1049:
		return fmt.Errorf("database %q does not exist at %s: create it (CREATE DATABASE %s) and run with -init-schema, or set MYSQL_DB", mcfg.DBName, where, mcfg.DBName)
	case errors.As(err, &me) && me.Number == 1044:
		return fmt.Errorf("user %q may not use database %q at %s (%v): GRANT it access", mcfg.User, mcfg.DBName, where, me)
	case errors.Is(err, mysql.ErrNoTLS):
		return fmt.Errorf("TLS was requested (MYSQL_USE_SSL or tls= in %s) but the server at %s does not support TLS: enable TLS on the server, or turn TLS off", cfg.DSNSource, where)
	case errors.As(err, &ce), errors.As(err, &ue), errors.As(err, &he):
		return fmt.Errorf("the TLS certificate of the server at %s is not trusted (%v): install its CA in the system's roots, or use -dsn with tls=skip-verify to encrypt without verifying", where, err)
	case errors.As(err, &me):
		return fmt.Errorf("MySQL at %s: %v", where, me)
	}
	if cfg.Embedded {
		return fmt.Errorf("the embedded server failed: %v", err)
	}
	return fmt.Errorf("cannot reach MySQL at %s within %s (%v): start the server, fix the address (MYSQL_HOST/MYSQL_TCP_PORT, MYSQL_JDBC_URL or -dsn), or raise -connect-timeout", where, cfg.ConnectTimeout, err)
}

func redactor(secret string) func(string) string {
	if secret == "" {
		return func(s string) string { return s }
	}
	return func(s string) string { return strings.ReplaceAll(s, secret, "****") }
}
