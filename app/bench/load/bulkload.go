package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// The bulk loader of the query benchmark: generated traces written
// straight into the schema, a table at a time, with LOAD DATA LOCAL INFILE
// (or multi-row INSERTs where the server refuses it), instead of through
// POST /api/v2/spans. The rows are the store's own (mysqlstore.BulkRows):
// the tables hold what ingest would have stored for the same spans,
// including the schema additions the database has.

// bulkGen generates traces in start-time order over [Begin, End) µs.
//
// Shape (bulkTrace): a SERVER root in an entry service (services are
// picked with a skew: svc-00 is about 8 times as busy as svc-19), one to
// three calls from it, each a CLIENT span in the caller and a SERVER span
// in the callee (own span IDs, as OpenTelemetry and v2 instrumentation
// report them) that calls further with decreasing probability (depth ≤ 3);
// a server span calls a database (remote service mysql or redis, tags
// db.system and db.statement, 500 statements) with probability 0.4 and
// sends a message (PRODUCER to kafka; a CONSUMER span in another service)
// with probability 0.05. Each service has 10 span names of its own (200 in
// all). Server spans carry http.method, http.route (the span name's path)
// and http.status_code, client spans http.method and http.route; 2 % of
// traces fail (a server span and its client get error and status 500,
// error values from 5 messages); 5 % of spans have a timeline annotation
// (retry, cache.miss or gc). Trace IDs are 128-bit, Brave-style: the epoch
// second in the top 32 bits of the high half, the rest random.
type bulkGen struct {
	Begin, End int64 // µs
	Traces     int   // traces spread over the window
	Seed       uint64
}

// bulkServiceIPs are the local addresses of the services.
func bulkServiceIP(svc int) netip.Addr { return netip.AddrFrom4([4]byte{10, 2, byte(svc), 1}) }

var (
	bulkMethods    = [...]string{"GET", "GET", "GET", "GET", "GET", "GET", "GET", "POST", "POST", "PUT", "DELETE"}
	bulkErrors     = [...]string{"500", "timeout", "connection refused", "deadline exceeded", "internal server error"}
	bulkAnnotation = [...]string{"retry", "cache.miss", "gc"}
)

// bulkSpanName returns span name j (0..9) of service svc.
func bulkSpanName(svc, j int) string { return SpanName(svc*10 + j) }

// bulkService picks an entry or callee service, skewed toward low numbers.
func bulkService(rng *rand.Rand) int {
	return min(NumServices-1, int(float64(NumServices)*math.Pow(rng.Float64(), 1.7)))
}

// trace generates trace number i (0 ≤ i < Traces).
func (g *bulkGen) trace(i int, dst []model.Span) []model.Span {
	seed := g.Seed*0x9e3779b97f4a7c15 + uint64(i)
	rng := rand.New(rand.NewPCG(seed, seed^0xdeadbeef))
	step := float64(g.End-g.Begin) / float64(g.Traces)
	ts := g.Begin + int64((float64(i)+rng.Float64())*step)
	tid := model.TraceID{High: uint64(ts/1_000_000)<<32 | uint64(rng.Uint32()), Low: rng.Uint64() | 1}
	failed := rng.IntN(50) == 0
	nextID := func() model.ID { return model.ID(rng.Uint64() | 1) }
	start := len(dst)
	total := int64(5_000 + rng.ExpFloat64()*60_000)
	var server func(svc int, parent model.ID, at, dur int64, depth int)
	server = func(svc int, parent model.ID, at, dur int64, depth int) {
		name := bulkSpanName(svc, rng.IntN(10))
		id := nextID()
		if parent == 0 {
			id = model.ID(tid.Low)
		}
		sp := model.Span{TraceID: tid, ParentID: parent, ID: id, Kind: model.KindServer, Name: name, Timestamp: at, Duration: dur,
			LocalEndpoint: &model.Endpoint{ServiceName: ServiceName(svc), IPv4: bulkServiceIP(svc), Port: 8080},
			Tags: map[string]string{"http.method": bulkMethods[rng.IntN(len(bulkMethods))],
				"http.route": name[strings.IndexByte(name, ' ')+1:], "http.status_code": "200"}}
		if rng.IntN(20) == 0 {
			sp.Annotations = []model.Annotation{{Timestamp: at + dur/3, Value: bulkAnnotation[rng.IntN(len(bulkAnnotation))]}}
		}
		dst = append(dst, sp)
		self := len(dst) - 1
		calls := 0
		if depth < 3 && rng.IntN(depth+1) == 0 {
			calls = 1 + rng.IntN(3)
		}
		for c := 0; c < calls && len(dst)-start < 40; c++ {
			callee := (svc + 1 + bulkService(rng)) % NumServices
			cat := at + dur/10 + int64(c)*dur/(4*int64(calls))
			cdur := max(dur/(2*int64(calls)), 200)
			cname := bulkSpanName(callee, rng.IntN(10))
			cid := nextID()
			client := model.Span{TraceID: tid, ParentID: id, ID: cid, Kind: model.KindClient, Name: cname, Timestamp: cat, Duration: cdur,
				LocalEndpoint:  &model.Endpoint{ServiceName: ServiceName(svc), IPv4: bulkServiceIP(svc), Port: 8080},
				RemoteEndpoint: &model.Endpoint{ServiceName: ServiceName(callee), IPv4: bulkServiceIP(callee), Port: 8080},
				Tags:           map[string]string{"http.method": bulkMethods[rng.IntN(len(bulkMethods))], "http.route": cname[strings.IndexByte(cname, ' ')+1:]}}
			dst = append(dst, client)
			ci := len(dst) - 1
			server(callee, cid, cat+cdur/20, cdur*9/10, depth+1)
			if failed && depth+1 == 2 && c == 0 {
				msg := bulkErrors[rng.IntN(len(bulkErrors))]
				dst[ci].Tags["error"] = msg
				dst[ci+1].Tags["error"] = msg
				dst[ci+1].Tags["http.status_code"] = "500"
			}
		}
		if rng.IntN(5) < 2 {
			remote, system := "mysql", "mysql"
			if rng.IntN(3) == 0 {
				remote, system = "redis", "redis"
			}
			qat := at + dur/2
			dst = append(dst, model.Span{TraceID: tid, ParentID: id, ID: nextID(), Kind: model.KindClient, Name: "query", Timestamp: qat,
				Duration:       max(dur/8, 100),
				LocalEndpoint:  &model.Endpoint{ServiceName: ServiceName(svc), IPv4: bulkServiceIP(svc), Port: 8080},
				RemoteEndpoint: &model.Endpoint{ServiceName: remote, IPv4: netip.AddrFrom4([4]byte{10, 3, 0, 1}), Port: 3306},
				Tags: map[string]string{"db.system": system,
					"db.statement": fmt.Sprintf("SELECT * FROM t%d WHERE id = ?", rng.IntN(500))}})
		}
		if rng.IntN(20) == 0 {
			mid := nextID()
			consumer := (svc + 1 + bulkService(rng)) % NumServices
			mat := at + dur*3/4
			topic := fmt.Sprintf("topic-%02d", rng.IntN(20))
			dst = append(dst,
				model.Span{TraceID: tid, ParentID: id, ID: mid, Kind: model.KindProducer, Name: "send", Timestamp: mat, Duration: 300,
					LocalEndpoint:  &model.Endpoint{ServiceName: ServiceName(svc), IPv4: bulkServiceIP(svc), Port: 8080},
					RemoteEndpoint: &model.Endpoint{ServiceName: "kafka"}, Tags: map[string]string{"messaging.destination": topic}},
				model.Span{TraceID: tid, ParentID: mid, ID: nextID(), Kind: model.KindConsumer, Name: "poll", Timestamp: mat + 2_000, Duration: 1_000,
					LocalEndpoint:  &model.Endpoint{ServiceName: ServiceName(consumer), IPv4: bulkServiceIP(consumer), Port: 8080},
					RemoteEndpoint: &model.Endpoint{ServiceName: "kafka"}, Tags: map[string]string{"messaging.destination": topic}})
		}
		if failed && depth == 0 && calls == 0 {
			dst[self].Tags["error"] = bulkErrors[rng.IntN(len(bulkErrors))]
			dst[self].Tags["http.status_code"] = "500"
		}
	}
	server(bulkService(rng), 0, ts, total, 0)
	for k := start; k < len(dst); k++ {
		dst[k].Normalize()
	}
	return dst
}

// BulkResult is what one bulk load did.
type BulkResult struct {
	Spans       int64            `json:"spans"`
	Traces      int              `json:"traces"`
	Rows        map[string]int64 `json:"rows"`
	Seconds     float64          `json:"seconds"`
	SpansPerS   float64          `json:"spans_per_s"`
	RowsPerS    float64          `json:"rows_per_s"`
	Method      string           `json:"method"` // "LOAD DATA LOCAL INFILE" or "INSERT"
	ChunkTraces int              `json:"chunk_traces"`
	// IndexSeconds is the part of Seconds spent building the secondary
	// indexes of zipkin_spans and zipkin_annotations after the rows.
	IndexSeconds float64 `json:"index_seconds"`
}

// bulkLoad writes g's traces into the Zipkin schema of db (which must
// exist; the additions it has are filled too), chunkTraces traces per
// statement of each table, the tables in parallel. It uses LOAD DATA LOCAL
// INFILE, or multi-row INSERTs when insert is set or the server refuses
// LOAD DATA LOCAL (local_infile=OFF). With deferIndexes the secondary
// indexes of zipkin_spans and zipkin_annotations are dropped first and
// built again at the end (the same definitions). progress, if not nil, is
// called after each chunk is generated with the spans generated so far.
func bulkLoad(ctx context.Context, db *sql.DB, g bulkGen, chunkTraces int, insert, deferIndexes bool, progress func(int64)) (BulkResult, error) {
	// The autocomplete keys the benchmark's server is started with
	// (AUTOCOMPLETE_KEYS), so that zipkin_tags holds their values as ingest
	// would have written them.
	var keys []string
	for k := range strings.SplitSeq(os.Getenv("AUTOCOMPLETE_KEYS"), ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	st, err := mysqlstore.Open(ctx, db, mysqlstore.Options{AutocompleteKeys: keys})
	if err != nil {
		return BulkResult{}, err
	}
	if !insert {
		var v string
		if err := db.QueryRowContext(ctx, "SELECT @@local_infile").Scan(&v); err != nil || (v != "1" && !strings.EqualFold(v, "ON")) {
			insert = true
		}
	}
	res := BulkResult{Traces: g.Traces, Rows: map[string]int64{}, ChunkTraces: chunkTraces, Method: "LOAD DATA LOCAL INFILE"}
	if insert {
		res.Method = "INSERT"
	}
	t0 := time.Now()
	// Secondary indexes are dropped during the load and built afterwards
	// in one ALTER TABLE per table (sorted, not row by row).
	rebuild := map[string][]string{}
	if deferIndexes {
		for _, table := range []string{"zipkin_spans", "zipkin_annotations"} {
			add, drop, err := secondaryIndexes(ctx, db, table)
			if err != nil {
				return res, err
			}
			if len(drop) == 0 {
				continue
			}
			if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" "+strings.Join(drop, ", ")); err != nil {
				return res, fmt.Errorf("dropping the indexes of %s for the bulk load: %w", table, err)
			}
			rebuild[table] = add
		}
	}
	// One writer goroutine per table, each fed chunks in order; the
	// generator runs ahead by at most two chunks.
	var writers []chan []mysqlstore.BulkTable
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	failed := func() bool { errMu.Lock(); defer errMu.Unlock(); return firstErr != nil }
	var rowsMu sync.Mutex
	var spans atomic.Int64
	var nameSeq atomic.Int64
	startWriter := func(idx int) chan []mysqlstore.BulkTable {
		ch := make(chan []mysqlstore.BulkTable, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tables := range ch {
				t := tables[idx]
				if failed() || len(t.Rows) == 0 {
					continue
				}
				var err error
				if insert {
					err = bulkInsert(ctx, db, t)
				} else {
					err = bulkLoadData(ctx, db, t, fmt.Sprintf("sqlpool-bulk-%d", nameSeq.Add(1)))
				}
				if err != nil {
					fail(fmt.Errorf("bulk load into %s: %w", t.Table, err))
					continue
				}
				rowsMu.Lock()
				res.Rows[t.Table] += int64(len(t.Rows))
				rowsMu.Unlock()
			}
		}()
		return ch
	}
	var buf []model.Span
	for first := 0; first < g.Traces && !failed() && ctx.Err() == nil; first += chunkTraces {
		buf = buf[:0]
		for i := first; i < min(first+chunkTraces, g.Traces); i++ {
			buf = g.trace(i, buf)
		}
		tables, err := st.BulkRows(buf)
		if err != nil {
			fail(err)
			break
		}
		if writers == nil {
			for i := range tables {
				writers = append(writers, startWriter(i))
			}
		}
		for _, w := range writers {
			w <- tables
		}
		n := spans.Add(int64(len(buf)))
		if progress != nil {
			progress(n)
		}
	}
	for _, w := range writers {
		close(w)
	}
	wg.Wait()
	if firstErr == nil && len(rebuild) > 0 {
		t1 := time.Now()
		var rwg sync.WaitGroup
		for table, add := range rebuild {
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" "+strings.Join(add, ", ")); err != nil {
					fail(fmt.Errorf("building the indexes of %s after the bulk load: %w", table, err))
				}
			}()
		}
		rwg.Wait()
		res.IndexSeconds = time.Since(t1).Seconds()
	}
	res.Spans = spans.Load()
	res.Seconds = time.Since(t0).Seconds()
	var rows int64
	for _, n := range res.Rows {
		rows += n
	}
	res.SpansPerS, res.RowsPerS = float64(res.Spans)/res.Seconds, float64(rows)/res.Seconds
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

// secondaryIndexes returns the ADD clauses that recreate table's
// secondary indexes (everything but PRIMARY) and the DROP clauses that
// remove them, from information_schema.statistics.
func secondaryIndexes(ctx context.Context, db *sql.DB, table string) (add, drop []string, err error) {
	rows, err := db.QueryContext(ctx, `SELECT index_name, non_unique, column_name, sub_part FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = ? AND index_name <> 'PRIMARY' ORDER BY index_name, seq_in_index`, table)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	type index struct {
		unique bool
		cols   []string
	}
	var order []string
	idx := map[string]*index{}
	for rows.Next() {
		var name, col string
		var nonUnique int
		var sub sql.NullInt64
		if err := rows.Scan(&name, &nonUnique, &col, &sub); err != nil {
			return nil, nil, err
		}
		if idx[name] == nil {
			idx[name] = &index{unique: nonUnique == 0}
			order = append(order, name)
		}
		if sub.Valid {
			col += "(" + strconv.FormatInt(sub.Int64, 10) + ")"
		}
		idx[name].cols = append(idx[name].cols, col)
	}
	for _, name := range order {
		kind := "KEY"
		if idx[name].unique {
			kind = "UNIQUE KEY"
		}
		add = append(add, "ADD "+kind+" "+name+" ("+strings.Join(idx[name].cols, ", ")+")")
		drop = append(drop, "DROP INDEX "+name)
	}
	return add, drop, rows.Err()
}

// bulkLoadData writes t with one LOAD DATA LOCAL INFILE statement, the
// rows streamed as tab-separated text through a registered reader.
func bulkLoadData(ctx context.Context, db *sql.DB, t mysqlstore.BulkTable, name string) error {
	pr, pw := io.Pipe()
	mysql.RegisterReaderHandler(name, func() io.Reader { return pr })
	defer mysql.DeregisterReaderHandler(name)
	go func() {
		w := bufio.NewWriterSize(pw, 256<<10)
		var line []byte
		for _, r := range t.Rows {
			line = line[:0]
			for i, v := range r {
				if i > 0 {
					line = append(line, '\t')
				}
				line = appendTSV(line, v)
			}
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(w.Flush())
	}()
	cols := make([]string, len(t.Columns))
	var set []string
	for i, c := range t.Columns {
		cols[i] = c
		if c == "debug" { // BIT(1): through a variable, as a number
			cols[i] = "@debug"
			set = append(set, "debug = CAST(@debug AS UNSIGNED)")
		}
	}
	q := "LOAD DATA LOCAL INFILE 'Reader::" + name + "' IGNORE INTO TABLE " + t.Table +
		" CHARACTER SET utf8mb4 (" + strings.Join(cols, ", ") + ")"
	if len(set) > 0 {
		q += " SET " + strings.Join(set, ", ")
	}
	_, err := db.ExecContext(ctx, q)
	pr.Close()
	return err
}

// appendTSV appends v in LOAD DATA's default text format: \N for NULL,
// backslash escapes for tab, newline, carriage return, NUL and backslash.
func appendTSV(dst []byte, v any) []byte {
	var s string
	switch x := v.(type) {
	case nil:
		return append(dst, `\N`...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		s = fmt.Sprint(x)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\t':
			dst = append(dst, `\t`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case 0:
			dst = append(dst, `\0`...)
		case '\\':
			dst = append(dst, `\\`...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// bulkInsert writes t with multi-row INSERT IGNORE statements of at most
// 1,000 rows.
func bulkInsert(ctx context.Context, db *sql.DB, t mysqlstore.BulkTable) error {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.Columns)), ", ") + ")"
	head := "INSERT IGNORE INTO " + t.Table + " (" + strings.Join(t.Columns, ", ") + ") VALUES "
	for start := 0; start < len(t.Rows); start += 1000 {
		part := t.Rows[start:min(start+1000, len(t.Rows))]
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
		if _, err := db.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return nil
}
