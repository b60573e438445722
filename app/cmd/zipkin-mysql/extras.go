package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// startRetention starts the retention component when -retention is set
// and the storage is MySQL. The returned function stops it and waits for
// it; it is never nil.
func startRetention(cfg *config, st *openedStorage, log *slog.Logger, reg prometheus.Registerer) (func(), error) {
	if cfg.Retention <= 0 {
		return func() {}, nil
	}
	if st.mysql == nil {
		if cfg.Storage != "postgres" { // postgres runs its own (startPostgresBackground)
			log.Warn("-retention is ignored: there is no MySQL or PostgreSQL storage", "storage", cfg.Storage)
		}
		return func() {}, nil
	}
	r, err := st.mysql.NewRetention(mysqlstore.RetentionOptions{MaxAge: cfg.Retention, Interval: cfg.RetentionInterval})
	if err != nil {
		return nil, err
	}
	counter := func(name, help string, get func(mysqlstore.RetentionStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(get(r.Stats())) })
	}
	for _, c := range []prometheus.Collector{
		counter("zipkin_retention_spans_deleted_total", "Spans deleted by -retention.", func(s mysqlstore.RetentionStats) int64 { return s.SpansDeleted }),
		counter("zipkin_retention_annotations_deleted_total", "Annotation rows deleted by -retention.", func(s mysqlstore.RetentionStats) int64 { return s.AnnotationsDeleted }),
		counter("zipkin_retention_tag_rows_deleted_total", "zipkin_tags rows deleted by -retention with the spans they index.", func(s mysqlstore.RetentionStats) int64 { return s.TagRowsDeleted }),
		counter("zipkin_retention_batches_total", "Retention transactions committed.", func(s mysqlstore.RetentionStats) int64 { return s.Batches }),
		counter("zipkin_retention_retries_total", "Retention transactions run again after a deadlock, lock wait timeout or lost connection.", func(s mysqlstore.RetentionStats) int64 { return s.Retries }),
		counter("zipkin_retention_errors_total", "Retention batches that failed after their retries.", func(s mysqlstore.RetentionStats) int64 { return s.Errors }),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	log.Info("retention on", "max_age", cfg.Retention)
	return func() { cancel(); wg.Wait() }, nil
}

// startDependencyAggregation drains the MySQL store's dependency queue
// every 3 s in the background (the store also drains after writes), so
// that zipkin_dependencies lags the writes by a bounded time even when they
// stop, and exports that lag as zipkin_dependency_lag_seconds. The returned
// function stops it and waits for it; it is never nil.
func startDependencyAggregation(st *openedStorage, log *slog.Logger, reg prometheus.Registerer) (func(), error) {
	if st.mysql == nil || !st.mysql.DependencyAggregation() {
		return func() {}, nil
	}
	m := st.mysql
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zipkin_dependency_lag_seconds",
		Help: "Age of the oldest write the dependency aggregator has not counted into zipkin_dependencies yet (GetDependencies counts it already); -1 when it cannot be read."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			d, err := m.DependencyLag(ctx)
			if err != nil {
				return -1
			}
			return d.Seconds()
		})
	if err := reg.Register(lag); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = m.RunDependencyAggregation(ctx, 0) }()
	log.Debug("dependency aggregation draining in the background")
	return func() { cancel(); wg.Wait() }, nil
}

// registerStoreStats exports the store's lock-conflict counters (MySQL) or
// its size and evictions (memory).
func registerStoreStats(st *openedStorage, reg prometheus.Registerer) error {
	if m := st.mem; m != nil {
		for _, c := range []prometheus.Collector{
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zipkin_storage_memory_spans",
				Help: "Spans held by the in-memory storage (at most MEM_MAX_SPANS)."},
				func() float64 { return float64(m.Stats().Spans) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zipkin_storage_memory_evicted_spans_total",
				Help: "Spans the in-memory storage evicted (with their whole, oldest, traces) to stay within MEM_MAX_SPANS."},
				func() float64 { return float64(m.Stats().EvictedSpans) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zipkin_storage_memory_evicted_traces_total",
				Help: "Traces the in-memory storage evicted, oldest first, to stay within MEM_MAX_SPANS."},
				func() float64 { return float64(m.Stats().EvictedTraces) }),
		} {
			if err := reg.Register(c); err != nil {
				return err
			}
		}
		return nil
	}
	if st.mysql == nil {
		return nil
	}
	s := st.mysql
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zipkin_mysql_deadlocks_total",
			Help: "Span write transactions that hit a deadlock (1213); each is run again unless its retries ran out."},
			func() float64 { return float64(s.Stats().Deadlocks) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zipkin_mysql_lock_wait_timeouts_total",
			Help: "Span write transactions that hit a lock wait timeout (1205); each is run again unless its retries ran out."},
			func() float64 { return float64(s.Stats().LockWaitTimeouts) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// startPprof serves net/http/pprof on its own listener when -pprof is set,
// with the mutex profile (1 in 5 contention events) and the block profile
// (events of 10 µs and more, sampled) on. The returned function stops it;
// it is never nil.
func startPprof(addr string, log *slog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-pprof=%s: cannot listen (%v): pass a free address such as 127.0.0.1:6060", addr, err)
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(int((10 * time.Microsecond).Nanoseconds()))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "err", err)
		}
	}()
	log.Info("pprof on", "addr", ln.Addr().String())
	return func() {
		_ = hs.Close()
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}, nil
}
