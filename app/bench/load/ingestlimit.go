package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	_ "github.com/sqlpool/sqlpool/mysqldialect"
	"github.com/sqlpool/sqlpool/pool"
)

// The ingest-limit benchmark (-ingest-limit): in one run on one private
// MariaDB pinned to -cpus-db with a -buffer-pool (128M) buffer pool, the
// same workload (the load test's 10-span JSON v2 traces, decoded once) is
// written by each path in turn, in interleaved rounds, each path on a
// database of its own emptied before its turn:
//
//   - raw-insert: hand-written multi-row INSERT IGNORE of Zipkin's rows
//     (zipkin_spans, zipkin_annotations as the store builds them) into
//     Zipkin's own schema, one transaction per batch;
//   - raw-insert-text: the same with the driver's interpolateParams (no
//     server-side prepare per statement);
//   - raw-loaddata: LOAD DATA LOCAL INFILE of the same rows, one
//     transaction per batch;
//   - store-zipkin: Store.Accept on Zipkin's own schema (mysql.sql's
//     indexes, no additions, no dependency aggregation): the store's own
//     statement shape;
//   - store-indexes: on CreateSchema's zipkin_annotations (the tag search
//     indexes in place of two redundant ones), no other addition;
//   - store-names: plus zipkin_names and zipkin_service_spans;
//   - store: every addition and dependency aggregation, on sqlpool (the
//     span server's store);
//   - store-sql: the same on plain database/sql.
//
// Each path runs -il-writers goroutines writing batches of -il-batch spans.
// For each it reports spans/s and, per span, the database's work: CPU time
// of mariadbd, redo bytes (Innodb_lsn_current), rows inserted, read and
// updated, statements, buffer-pool page requests and pages written. The
// ratio to raw-insert of the same round is the figure that counts on a
// shared machine.

type ingestLimitOptions struct {
	spans   int // spans per path per round
	batch   int
	writers int
	rounds  int
	paths   []string
}

var allIngestPaths = []string{"raw-insert", "raw-insert-text", "raw-loaddata", "store-zipkin", "store-indexes", "store-names", "store", "store-sql", "http-90", "http-100"}

// validIngestPath reports whether p is a path of -il-paths: one of
// allIngestPaths, or http-PCT for any positive percentage.
func validIngestPath(p string) bool {
	_, isHTTP := ilHTTPFraction(p)
	return isHTTP || slices.Contains(allIngestPaths, p)
}

// zipkinAnnotationIndexes turns CreateSchema's zipkin_annotations into
// Zipkin's own (mysql.sql): a_key on a_key alone, trace_id_high_2 and
// trace_id_high_3 instead of a_key_value.
const zipkinAnnotationIndexes = "ALTER TABLE zipkin_annotations DROP INDEX a_key_value, DROP INDEX a_key, ADD INDEX a_key (a_key)," +
	" ADD INDEX trace_id_high_2 (trace_id_high, trace_id, span_id), ADD INDEX trace_id_high_3 (trace_id_high, trace_id)"

// ilResult is one path's turn in one round.
type ilResult struct {
	Path    string             `json:"path"`
	Round   int                `json:"round"`
	Spans   int                `json:"spans"`
	Seconds float64            `json:"seconds"`
	Rate    float64            `json:"spans_per_s"`
	PerSpan map[string]float64 `json:"per_span"` // db_cpu_us, redo_bytes, rows_inserted, ...
	Lag     float64            `json:"additions_lag_s,omitempty"`
	// HTTP is set on the HTTP paths (ingesthttp.go).
	HTTP *ilHTTP `json:"http,omitempty"`
}

// statusCounters are the SHOW GLOBAL STATUS counters the benchmark reads.
var statusCounters = []string{
	"Innodb_lsn_current", "Innodb_os_log_written", "Handler_write", "Handler_read_key", "Handler_read_next",
	"Handler_read_rnd_next", "Handler_update", "Handler_delete", "Innodb_buffer_pool_read_requests",
	"Innodb_buffer_pool_write_requests", "Innodb_pages_written", "Innodb_buffer_pool_reads",
	"Questions", "Com_commit", "Innodb_data_written",
}

func readStatus(ctx context.Context, db *sql.DB) (map[string]float64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if slices.Contains(statusCounters, k) {
			f, _ := strconv.ParseFloat(v, 64)
			out[k] = f
		}
	}
	return out, rows.Err()
}

// ilWorkload generates n spans of the load test's traces with fresh IDs.
func ilWorkload(n int, seed uint64) ([]model.Span, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ids := &realIDs{high: rng.Uint64() | 1, baseMicro: time.Now().UnixMicro() - 3_600_000_000}
	out := make([]model.Span, 0, n)
	var body []byte
	for len(out) < n {
		ids.low = rng.Uint64() | 1
		ids.baseMicro += 500
		body = appendTrace(body[:0], rng, ids)
		spans, err := codec.DecodeJSONV2(body)
		if err != nil {
			return nil, err
		}
		for i := range spans {
			spans[i].Normalize()
		}
		out = append(out, spans...)
	}
	return out[:n], nil
}

func runIngestLimit(ctx context.Context, o options, il ingestLimitOptions, logf func(string, ...any)) error {
	m, err := startMariaDB(ctx, o.cpusDB, o.bufferPool, "", logf)
	if err != nil {
		return err
	}
	defer m.stop()
	if _, err := m.db.ExecContext(ctx, "SET GLOBAL local_infile = 1"); err != nil {
		return err
	}
	// The writers of the raw and store paths run in this process: on the
	// load CPUs, as the HTTP paths' server and generator do, so that
	// MariaDB's core is its own in every path.
	if out, err := exec.CommandContext(ctx, "taskset", "-a", "-p", "-c", o.cpusLoad, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		return fmt.Errorf("taskset -a -p -c %s (pinning the benchmark's writers): %v: %s", o.cpusLoad, err, out)
	}
	var e *env // the HTTP paths' servers and generator
	servers := map[string]*serverProc{}
	if slices.ContainsFunc(il.paths, func(p string) bool { _, ok := ilHTTPFraction(p); return ok }) {
		if !slices.Contains(il.paths, "raw-insert") {
			return fmt.Errorf("-il-paths: the http paths offer a share of raw-insert's rate: include raw-insert")
		}
		if e, err = ilHTTPEnv(ctx, &o, m); err != nil {
			return err
		}
		defer os.RemoveAll(e.tmp)
	}
	dbs := map[string]*sql.DB{}
	stores := map[string]*mysqlstore.Store{}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for _, p := range il.paths {
		name := "il_" + strings.ReplaceAll(p, "-", "_")
		if err := m.resetDatabase(ctx, name); err != nil {
			return err
		}
		cfg, err := mysql.ParseDSN(m.dsn(name))
		if err != nil {
			return err
		}
		cfg.AllowAllFiles = true
		cfg.Logger = nopLogger{}
		// raw-insert-text: the driver interpolates the values into the
		// statement text (interpolateParams=true): no server-side prepare
		// per statement.
		cfg.InterpolateParams = p == "raw-insert-text"
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return err
		}
		var db *sql.DB
		if p == "store-sql" || strings.HasPrefix(p, "raw-") {
			db = sql.OpenDB(conn)
			db.SetMaxOpenConns(il.writers + 2)
			db.SetMaxIdleConns(il.writers + 2)
		} else {
			pl, err := pool.New(conn, pool.Config{Name: name, MaxConns: il.writers + 2, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				return err
			}
			db = pl.OpenDB()
			closers = append(closers, func() { pl.Close() })
		}
		closers = append(closers, func() { db.Close() })
		dbs[p] = db
		if err := mysqlstore.CreateSchema(ctx, db); err != nil {
			return err
		}
		var drop []string
		additions := []string{"zipkin_names", "zipkin_service_spans", "zipkin_tags", "zipkin_dependency_traces", "zipkin_dependency_queue", "zipkin_dependency_hours"}
		switch p {
		case "raw-insert", "raw-insert-text", "raw-loaddata", "store-zipkin":
			drop = additions
			if _, err := db.ExecContext(ctx, zipkinAnnotationIndexes); err != nil {
				return err
			}
		case "store-indexes":
			drop = additions
		case "store-names":
			drop = additions[2:]
		}
		for _, t := range drop {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
				return err
			}
		}
		st, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		stores[p] = st
		if _, ok := ilHTTPFraction(p); ok {
			s, err := e.startServerOn(ctx, p, name, "-writers", strconv.Itoa(il.writers))
			if err != nil {
				return err
			}
			servers[p] = s
			closers = append(closers, s.stop)
		}
	}
	var results []ilResult
	seed := uint64(time.Now().UnixNano())
	for round := 1; round <= il.rounds; round++ {
		// Interleaved: the order rotates each round; with HTTP paths,
		// raw-insert goes first (their offered load is a share of its rate
		// in the same round).
		order := slices.Clone(il.paths)
		if e != nil {
			order = slices.DeleteFunc(order, func(p string) bool { return p == "raw-insert" })
		}
		k := (round - 1) % len(order)
		order = append(order[k:], order[:k]...)
		if e != nil {
			order = append([]string{"raw-insert"}, order...)
		}
		rawRate := 0.0
		for _, p := range order {
			seed++
			var spans []model.Span
			if servers[p] == nil {
				if spans, err = ilWorkload(il.spans, seed); err != nil {
					return err
				}
			}
			if err := ilTruncate(ctx, dbs[p]); err != nil {
				return err
			}
			var r ilResult
			if s := servers[p]; s != nil {
				r, err = ilRunHTTP(ctx, e, p, s, stores[p], rawRate, seed, il)
			} else {
				r, err = ilRunPath(ctx, m, p, dbs[p], stores[p], spans, il)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if p == "raw-insert" {
				rawRate = r.Rate
			}
			r.Round = round
			if h := r.HTTP; h != nil {
				logf("round %d %-13s offered %5.0f spans/s: %d POSTs, %.1f %% 202 (503 %d, other %d, errors %d), backlog at end %.0f spans (written in %.1f s), dependency lag %.1f s",
					round, p, h.OfferedSpans, h.Sent, h.Pct202, h.Rejected, h.Other, h.Errors, h.BacklogAtEnd, h.DrainSeconds, r.Lag)
			}
			logf("round %d %-13s %7.0f spans/s  db %6.1f µs/span  redo %6.0f B/span  rows %5.1f/span  stmts %5.2f/span",
				round, p, r.Rate, r.PerSpan["db_cpu_us"], r.PerSpan["redo_bytes"], r.PerSpan["rows_inserted"], r.PerSpan["statements"])
			results = append(results, r)
		}
	}
	return ilReport(o.out, il, results)
}

// ilTruncate empties every table of the database db is on.
func ilTruncate(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "SHOW TABLES")
	if err != nil {
		return err
	}
	var ts []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		ts = append(ts, t)
	}
	rows.Close()
	for _, t := range ts {
		if _, err := db.ExecContext(ctx, "TRUNCATE TABLE "+t); err != nil {
			return err
		}
	}
	return nil
}

func ilRunPath(ctx context.Context, m *mariaDB, path string, db *sql.DB, st *mysqlstore.Store, spans []model.Span, il ingestLimitOptions) (ilResult, error) {
	// Batches, and for the raw paths their rows built up front (the
	// store builds its rows inside Accept, as the server does).
	var batches [][]model.Span
	for i := 0; i < len(spans); i += il.batch {
		batches = append(batches, spans[i:min(i+il.batch, len(spans))])
	}
	var raw [][]mysqlstore.BulkTable
	if strings.HasPrefix(path, "raw-") {
		for _, b := range batches {
			t, err := st.BulkRows(b)
			if err != nil {
				return ilResult{}, err
			}
			raw = append(raw, t[:2])
		}
	}
	before, err := readStatus(ctx, m.db)
	if err != nil {
		return ilResult{}, err
	}
	cpu0, err := procCPU(m.pid())
	if err != nil {
		return ilResult{}, err
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, il.writers)
	for w := 0; w < il.writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) {
					return
				}
				var err error
				switch path {
				case "raw-insert", "raw-insert-text":
					err = ilRawInsert(ctx, db, raw[i])
				case "raw-loaddata":
					err = ilRawLoadData(ctx, db, raw[i], fmt.Sprintf("il-%d-%d", w, i))
				default:
					err = st.Accept(ctx, batches[i])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return ilResult{}, err
	}
	cpu1, err := procCPU(m.pid())
	if err != nil {
		return ilResult{}, err
	}
	after, err := readStatus(ctx, m.db)
	if err != nil {
		return ilResult{}, err
	}
	n := float64(len(spans))
	per := map[string]float64{
		"db_cpu_us":       float64((cpu1 - cpu0).Microseconds()) / n,
		"db_busy":         float64(cpu1-cpu0) / float64(elapsed),
		"redo_bytes":      (after["Innodb_lsn_current"] - before["Innodb_lsn_current"]) / n,
		"rows_inserted":   (after["Handler_write"] - before["Handler_write"]) / n,
		"rows_read":       (after["Handler_read_key"] + after["Handler_read_next"] + after["Handler_read_rnd_next"] - before["Handler_read_key"] - before["Handler_read_next"] - before["Handler_read_rnd_next"]) / n,
		"rows_updated":    (after["Handler_update"] - before["Handler_update"]) / n,
		"rows_deleted":    (after["Handler_delete"] - before["Handler_delete"]) / n,
		"statements":      (after["Questions"] - before["Questions"] - 2) / n,
		"page_reads_req":  (after["Innodb_buffer_pool_read_requests"] - before["Innodb_buffer_pool_read_requests"]) / n,
		"page_writes_req": (after["Innodb_buffer_pool_write_requests"] - before["Innodb_buffer_pool_write_requests"]) / n,
		"pages_written":   (after["Innodb_pages_written"] - before["Innodb_pages_written"]) / n,
		"pages_from_disk": (after["Innodb_buffer_pool_reads"] - before["Innodb_buffer_pool_reads"]) / n,
		"data_written_b":  (after["Innodb_data_written"] - before["Innodb_data_written"]) / n,
	}
	r := ilResult{Path: path, Spans: len(spans), Seconds: elapsed.Seconds(), Rate: n / elapsed.Seconds(), PerSpan: per}
	if err := ilTableSizes(ctx, db, n, per); err != nil {
		return ilResult{}, err
	}
	if st != nil && !strings.HasPrefix(path, "raw-") {
		lag, err := st.DependencyLag(ctx)
		if err != nil {
			return ilResult{}, err
		}
		r.Lag = lag.Seconds()
		// The rest of the queue, drained and timed: the additions' work
		// left behind by the writes (the store drains as it writes).
		cpuD0, _ := procCPU(m.pid())
		t0 := time.Now()
		if _, err := st.FoldDependencies(ctx); err != nil {
			return ilResult{}, err
		}
		cpuD1, _ := procCPU(m.pid())
		per["drain_after_s"] = time.Since(t0).Seconds()
		per["drain_after_db_cpu_us"] = float64((cpuD1 - cpuD0).Microseconds()) / n
	}
	return r, nil
}

// ilTableSizes adds each table's bytes per span (data and indexes, after
// ANALYZE TABLE) to per as "bytes <table>".
func ilTableSizes(ctx context.Context, db *sql.DB, n float64, per map[string]float64) error {
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
	if err != nil {
		return err
	}
	var ts []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		ts = append(ts, t)
	}
	rows.Close()
	for _, t := range ts {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+t); err != nil {
			return err
		}
		var data, index int64
		if err := db.QueryRowContext(ctx, "SELECT data_length, index_length FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", t).Scan(&data, &index); err != nil {
			return err
		}
		per["bytes "+t] = float64(data+index) / n
	}
	return nil
}

// ilRawInsert writes one batch's Zipkin rows as a client would by hand:
// one transaction, one multi-row INSERT IGNORE per table (in chunks of
// 1,000 rows).
func ilRawInsert(ctx context.Context, db *sql.DB, tables []mysqlstore.BulkTable) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range tables {
		row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.Columns)), ", ") + ")"
		head := "INSERT IGNORE INTO " + t.Table + " (" + strings.Join(t.Columns, ", ") + ") VALUES "
		for s := 0; s < len(t.Rows); s += 1000 {
			part := t.Rows[s:min(s+1000, len(t.Rows))]
			var b strings.Builder
			b.WriteString(head)
			args := make([]any, 0, len(part)*len(t.Columns))
			for i, r := range part {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(row)
				args = append(args, r...)
			}
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// ilRawLoadData writes one batch's Zipkin rows with LOAD DATA LOCAL
// INFILE, one statement per table, in one transaction.
func ilRawLoadData(ctx context.Context, db *sql.DB, tables []mysqlstore.BulkTable, name string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range tables {
		var buf []byte
		for _, r := range t.Rows {
			for i, v := range r {
				if i > 0 {
					buf = append(buf, '\t')
				}
				buf = appendTSV(buf, v)
			}
			buf = append(buf, '\n')
		}
		rn := name + "-" + t.Table
		data := buf
		mysql.RegisterReaderHandler(rn, func() io.Reader { return strings.NewReader(string(data)) })
		cols := slices.Clone(t.Columns)
		var set string
		for i, c := range cols {
			if c == "debug" {
				cols[i] = "@debug"
				set = " SET debug = CAST(@debug AS UNSIGNED)"
			}
		}
		_, err := tx.ExecContext(ctx, "LOAD DATA LOCAL INFILE 'Reader::"+rn+"' IGNORE INTO TABLE "+t.Table+
			" CHARACTER SET utf8mb4 ("+strings.Join(cols, ", ")+")"+set)
		mysql.DeregisterReaderHandler(rn)
		if err != nil {
			return err
		}
	}
	return tx.Commit()
}

type nopLogger struct{}

func (nopLogger) Print(...any) {}

// ilReport prints and writes (ingest-limit.md, ingest-limit.json in dir)
// the median, min and max of each path's rate and its ratio to raw-insert
// in the same round, and the per-span work.
func ilReport(dir string, il ingestLimitOptions, rs []ilResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "ingest limit: %d spans per path per round, batch %d, %d writers, %d rounds\n\n", il.spans, il.batch, il.writers, il.rounds)
	raw := map[int]float64{}
	tableBytes := map[string][]string{}
	defer func() {
		var t strings.Builder
		t.WriteString("\nbytes per span stored, per table (data + indexes after ANALYZE TABLE, median):\n\n")
		for _, p := range il.paths {
			fmt.Fprintf(&t, "- %s: %s\n", p, strings.Join(tableBytes[p], ", "))
		}
		fmt.Print(t.String())
		if dir != "" {
			f, err := os.OpenFile(filepath.Join(dir, "ingest-limit.md"), os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, _ = f.WriteString(t.String())
				f.Close()
			}
		}
	}()
	for _, r := range rs {
		if r.Path == "raw-insert" {
			raw[r.Round] = r.Rate
		}
	}
	fmt.Fprintf(&b, "| path | spans/s (median) | ÷ raw-insert min / median / max | DB µs/span | redo B/span | rows ins/span | rows read/span | stmts/span | page req/span | DB busy | lag at end s (max) | drain after, DB µs/span |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range il.paths {
		var rates, ratios []float64
		var agg = map[string][]float64{}
		maxLag := 0.0
		for _, r := range rs {
			if r.Path != p {
				continue
			}
			rates = append(rates, r.Rate)
			maxLag = max(maxLag, r.Lag)
			if raw[r.Round] > 0 {
				ratios = append(ratios, r.Rate/raw[r.Round])
			}
			for k, v := range r.PerSpan {
				agg[k] = append(agg[k], v)
			}
		}
		if len(rates) == 0 {
			continue
		}
		med := func(v []float64) float64 {
			v = slices.Clone(v)
			slices.Sort(v)
			return v[len(v)/2]
		}
		ratio := "–"
		if len(ratios) > 0 {
			ratio = fmt.Sprintf("%.2f / %.2f / %.2f", slices.Min(ratios), med(ratios), slices.Max(ratios))
		}
		drain := "–"
		if v := agg["drain_after_db_cpu_us"]; len(v) > 0 {
			drain = fmt.Sprintf("%.1f", med(v))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %.0f | %.1f | %.1f | %.2f | %.0f | %.0f %% | %.1f | %s |\n", p, med(rates), ratio,
			med(agg["db_cpu_us"]), med(agg["redo_bytes"]), med(agg["rows_inserted"]), med(agg["rows_read"]),
			med(agg["statements"]), med(agg["page_reads_req"])+med(agg["page_writes_req"]), 100*med(agg["db_busy"]), maxLag, drain)
		var tables []string
		for k := range agg {
			if strings.HasPrefix(k, "bytes ") {
				tables = append(tables, k)
			}
		}
		slices.Sort(tables)
		for _, k := range tables {
			tableBytes[p] = append(tableBytes[p], fmt.Sprintf("%s %.0f", strings.TrimPrefix(k, "bytes "), med(agg[k])))
		}
	}
	ilReportHTTP(&b, il, rs, raw)
	fmt.Print("\n" + b.String())
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ingest-limit.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "ingest-limit.json"), rs)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
