package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	"github.com/sqlpool/sqlpool/metrics"
	_ "github.com/sqlpool/sqlpool/pgdialect" // PostgreSQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
)

// postgresVars are the variables of a PostgreSQL server in the style of
// Zipkin's MYSQL_* ones.
var postgresVars = []string{"POSTGRES_HOST", "POSTGRES_TCP_PORT", "POSTGRES_DB", "POSTGRES_USER", "POSTGRES_PASS"}

// resolvePostgres sets c.Postgres for -storage=postgres: -postgres-dsn >
// POSTGRES_DSN > POSTGRES_* (defaults localhost, 5432, database zipkin, user
// postgres, no password, sslmode prefer), and c.MaxConns from
// POSTGRES_MAX_CONNECTIONS when set.
func (c *config) resolvePostgres(dsnFlag string, getenv func(string) string) error {
	n, err := envInt(getenv, "POSTGRES_MAX_CONNECTIONS", c.MaxConns)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("POSTGRES_MAX_CONNECTIONS=%d: use a positive number (default %d)", n, defaultMaxConns)
	}
	c.MaxConns = n
	var set []string
	for _, v := range postgresVars {
		if getenv(v) != "" {
			set = append(set, v)
		}
	}
	switch {
	case dsnFlag != "":
		c.Postgres, c.PostgresSource = dsnFlag, "-postgres-dsn"
	case getenv("POSTGRES_DSN") != "":
		c.Postgres, c.PostgresSource = getenv("POSTGRES_DSN"), "POSTGRES_DSN"
	default:
		host := or(getenv("POSTGRES_HOST"), "localhost")
		port := or(getenv("POSTGRES_TCP_PORT"), "5432")
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("POSTGRES_TCP_PORT=%q is not a port number (1-65535)", port)
		}
		u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(host, port), Path: "/" + or(getenv("POSTGRES_DB"), "zipkin")}
		if pass := getenv("POSTGRES_PASS"); pass != "" {
			u.User = url.UserPassword(or(getenv("POSTGRES_USER"), "postgres"), pass)
		} else {
			u.User = url.User(or(getenv("POSTGRES_USER"), "postgres"))
		}
		c.Postgres, c.PostgresSource = u.String(), "POSTGRES_*"
		set = nil
	}
	if len(set) > 0 {
		c.Warnings = append(c.Warnings, strings.Join(set, ", ")+" ignored: "+c.PostgresSource+" is set")
	}
	cfg, err := pgx.ParseConfig(c.Postgres)
	if err != nil {
		return fmt.Errorf("%s is not a PostgreSQL URL (%v): use postgres://user:password@host:5432/zipkin?sslmode=disable", c.PostgresSource, redact(err.Error(), postgresPassword(c.Postgres)))
	}
	if cfg.Database == "" {
		return fmt.Errorf("no database named in %s: name one (…/zipkin), as POSTGRES_DB", c.PostgresSource)
	}
	return nil
}

func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "xxxxx")
}

// postgresPassword is the password in a PostgreSQL URL, for redaction.
func postgresPassword(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	return cfg.Password
}

// postgresAddr describes a PostgreSQL URL without credentials: host:port/db.
func postgresAddr(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "postgres"
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database
}

// openPostgres opens the PostgreSQL store: pgx's connector under the pool
// (or plain database/sql with -pool=database-sql), the schema created with
// -init-schema, the pool's metrics registered on reg.
func openPostgres(ctx context.Context, cfg *config, log *slog.Logger, reg *prometheus.Registry) (*openedStorage, error) {
	pcfg, err := pgx.ParseConfig(cfg.Postgres)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", cfg.PostgresSource, redact(err.Error(), postgresPassword(cfg.Postgres)))
	}
	if pcfg.ConnectTimeout == 0 {
		pcfg.ConnectTimeout = cfg.ConnectTimeout
	}
	connector := stdlib.GetConnector(*pcfg)
	addr := postgresAddr(cfg.Postgres)
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var db *sql.DB
	switch cfg.Pool {
	case "database-sql":
		db = sql.OpenDB(connector)
		db.SetMaxOpenConns(cfg.MaxConns)
		db.SetMaxIdleConns(cfg.MaxConns)
	default:
		m, err := metrics.New(metrics.Options{})
		if err != nil {
			return nil, err
		}
		p, err := pool.New(connector, pool.Config{Name: "zipkin", MaxConns: cfg.MaxConns,
			InitializationFailTimeout: cfg.ConnectTimeout, ConnectTimeout: cfg.ConnectTimeout, Trace: m.Trace(), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("cannot reach PostgreSQL at %s (%s): %s; check the server is up and the URL's user, password and database",
				addr, cfg.PostgresSource, redact(err.Error(), pcfg.Password))
		}
		closers = append(closers, func() { _ = p.Close() })
		if err := m.Register(p); err != nil {
			closeAll()
			return nil, err
		}
		if err := reg.Register(m); err != nil {
			closeAll()
			return nil, err
		}
		db = p.OpenDB()
	}
	closers = append(closers, func() { _ = db.Close() })
	sctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout+30*time.Second)
	defer cancel()
	if cfg.InitSchema {
		if err := pgstore.CreateSchema(sctx, db); err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: check that user %q may CREATE TABLE in database %q", redact(err.Error(), pcfg.Password), pcfg.User, pcfg.Database)
		}
	}
	store, err := pgstore.Open(sctx, db, pgstore.Options{
		DisableStrictTraceID: !cfg.StrictTraceID,
		DisableSearch:        !cfg.SearchEnabled,
		AutocompleteKeys:     append([]string(nil), cfg.AutocompleteKeys...),
		// The dependency queue is drained by startPostgresBackground's
		// timer, off the writers' goroutines.
		DependencyDrainInterval: -1,
	})
	if err != nil {
		closeAll()
		if errors.Is(err, pgstore.ErrNoSchema) {
			return nil, fmt.Errorf("the Zipkin tables are missing in database %q at %s: run once with -init-schema", pcfg.Database, addr)
		}
		return nil, fmt.Errorf("PostgreSQL at %s: %s", addr, redact(err.Error(), pcfg.Password))
	}
	stop, err := startPostgresBackground(cfg, store, log, reg)
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, stop)
	return &openedStorage{store: store, name: "PostgresStorage{" + addr + "}", user: pcfg.User, close: closeAll}, nil
}

// startPostgresBackground starts the store's background work: the dependency
// drain every 3 s (lag exported as zipkin_dependency_lag_seconds) and, with
// -retention, the retention passes (every -retention-interval) that delete
// spans and dependency counts older than -retention, with their counters.
// The returned function stops both and waits for them.
func startPostgresBackground(cfg *config, store *pgstore.Store, log *slog.Logger, reg prometheus.Registerer) (func(), error) {
	cs := []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zipkin_dependency_lag_seconds",
		Help: "Age of the oldest write the dependency aggregator has not counted into zipkin_dependency_hours yet (GetDependencies counts it already); -1 when it cannot be read."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			d, err := store.DependencyLag(ctx)
			if err != nil {
				return -1
			}
			return d.Seconds()
		})}
	var ret *pgstore.Retention
	if cfg.Retention > 0 {
		var err error
		ret, err = store.NewRetention(pgstore.RetentionOptions{MaxAge: cfg.Retention, Interval: cfg.RetentionInterval, Logger: log})
		if err != nil {
			return nil, err
		}
		counter := func(name, help string, get func(pgstore.RetentionStats) int64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
				func() float64 { return float64(get(ret.Stats())) })
		}
		cs = append(cs,
			counter("zipkin_retention_spans_deleted_total", "Spans deleted by -retention.", func(s pgstore.RetentionStats) int64 { return s.SpansDeleted }),
			counter("zipkin_retention_passes_total", "Retention passes finished.", func(s pgstore.RetentionStats) int64 { return s.Passes }),
			counter("zipkin_retention_errors_total", "Retention passes that failed (the next pass tries again).", func(s pgstore.RetentionStats) int64 { return s.Errors }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = store.RunDependencyAggregation(ctx, 0) }()
	if ret != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _ = ret.Run(ctx) }()
		log.Info("retention on", "max_age", cfg.Retention)
	}
	return func() { cancel(); wg.Wait() }, nil
}
