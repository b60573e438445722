package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/retry"
	"github.com/sqlpool/sqlpool/stmtname"
)

// The dependency queue: how the aggregator learns what to link without
// adding work per trace to the write transaction.
//
// Each write transaction adds one row to zipkin_dependency_queue next to
// its span and annotation rows: the linker's view of those rows (depRow:
// per span row its parent ID, start_ts and whether it was written shared;
// per annotation row with a key the linker reads — lc, cs, ca, sr, sa, ma,
// mr, ms, error — its key, type, timestamp and service name), a few dozen
// bytes per span in one BLOB. The row commits or rolls back with the spans.
//
// The drain (DrainDependencies; the store runs it after writes once
// Options.DependencyFoldInterval has passed, and RunDependencyAggregation
// runs it on a timer) takes the oldest queue rows in large batches, one
// transaction each: it deletes them, reads the record of each trace they
// name (zipkin_dependency_traces: the trace's depRows so far, the hour it
// counts in and the links it counted), applies the new depRows as the
// database applied the rows (INSERT IGNORE of annotations: the first row
// of a key and timestamp wins; upsert of spans: parent and start_ts as
// Zipkin's ON DUPLICATE KEY UPDATE), links the trace with Zipkin's
// DependencyLinker rules, and adds the difference from what the record
// counted to zipkin_dependencies (per UTC day) and zipkin_dependency_hours
// (per hour), summed over the batch: a few rows per batch. It reads no
// span rows: the queue carries what the linker needs. The queue is the
// durable cursor: a restart resumes with the rows left; a batch written
// twice (a replay) changes nothing, its rows being already applied.
//
// GetDependencies is exact at every moment: in one snapshot it adds to the
// stored counts the differences of the traces still queued, computed as
// the drain would.
const (
	tableDepQueue = "zipkin_dependency_queue"
	tableDepHours = "zipkin_dependency_hours"

	// The aggregator's own tables are not Zipkin's: they are written once
	// per batch or trace and read back soon, so they skip the page
	// compression of Zipkin's tables (CPU on every page write).
	depTableOptions = " ENGINE=InnoDB ROW_FORMAT=DYNAMIC CHARACTER SET=utf8 COLLATE utf8_general_ci"

	ddlDepQueue = "CREATE TABLE IF NOT EXISTS " + tableDepQueue + ` (
  seq BIGINT NOT NULL AUTO_INCREMENT,
  created BIGINT NOT NULL,
  spans MEDIUMBLOB NOT NULL,
  PRIMARY KEY (seq)
)` + depTableOptions

	ddlDepHours = "CREATE TABLE IF NOT EXISTS " + tableDepHours + ` (
  hour BIGINT NOT NULL,
  parent VARCHAR(255) NOT NULL,
  child VARCHAR(255) NOT NULL,
  call_count BIGINT NOT NULL,
  error_count BIGINT NOT NULL,
  PRIMARY KEY (hour, parent, child)
)` + tableOptions

	probeDepQueue = "SELECT seq FROM " + tableDepQueue + " LIMIT 1"
	probeDepHours = "SELECT hour FROM " + tableDepHours + " LIMIT 1"

	stmtInsertDepQueue = "insert zipkin_dependency_queue"
	stmtDrainDepQueue  = "drain zipkin_dependency_queue"
	stmtSelectDepQueue = "select zipkin_dependency_queue"

	// hourMicros is one hour in microseconds.
	hourMicros = int64(3_600_000_000)
	// drainRows bounds the queue rows (write transactions) one drain
	// transaction takes.
	drainRows = 64
)

// depRow is one span or annotation row as the linker sees it.
type depRow struct {
	ann          bool   // an annotation row; else a span row
	shared       bool   // span row: written by the statement that keeps start_ts
	high, low    int64  // trace ID halves
	id           int64  // span ID
	parent, ts   int64  // span row: parent_id, start_ts (0: NULL); annotation row: ts is a_timestamp
	key, service string // annotation row: a_key, endpoint_service_name
	aType        int64  // annotation row: a_type
}

// depKey returns the dependency key an annotation key is stored as under
// utf8_general_ci ("" when the linker does not read it).
func depKey(key string) string {
	k := strings.ToLower(strings.TrimRight(key, " "))
	switch k {
	case "lc", "cs", "ca", "sr", "sa", "ma", "mr", "ms", "error":
		return k
	}
	return ""
}

// appendDepRows encodes rows (varints and length-prefixed strings).
func appendDepRows(b []byte, rows []*depRow) []byte {
	for _, r := range rows {
		flags := byte(0)
		if r.ann {
			flags |= 1
		}
		if r.shared {
			flags |= 2
		}
		b = append(b, flags)
		b = binary.AppendVarint(b, r.high)
		b = binary.AppendVarint(b, r.low)
		b = binary.AppendVarint(b, r.id)
		b = binary.AppendVarint(b, r.ts)
		if !r.ann {
			b = binary.AppendVarint(b, r.parent)
			continue
		}
		b = binary.AppendVarint(b, r.aType)
		b = binary.AppendUvarint(b, uint64(len(r.key)))
		b = append(b, r.key...)
		b = binary.AppendUvarint(b, uint64(len(r.service)))
		b = append(b, r.service...)
	}
	return b
}

var errDepRows = errors.New("mysqlstore: zipkin_dependency_queue or zipkin_dependency_traces holds rows this version cannot read")

func decodeDepRows(b []byte, dst []depRow) ([]depRow, error) {
	rd := varintReader{b: b}
	for len(rd.b) > 0 && !rd.bad {
		flags := rd.b[0]
		rd.b = rd.b[1:]
		r := depRow{ann: flags&1 != 0, shared: flags&2 != 0}
		r.high, r.low, r.id, r.ts = rd.varint(), rd.varint(), rd.varint(), rd.varint()
		if r.ann {
			r.aType = rd.varint()
			r.key = rd.str()
			r.service = rd.str()
		} else {
			r.parent = rd.varint()
		}
		if rd.bad {
			return dst, errDepRows
		}
		dst = append(dst, r)
	}
	return dst, nil
}

// varintReader reads the dependency tables' encoded rows and records: signed varints,
// unsigned varints and length-prefixed strings. A short or malformed read sets bad and
// returns the zero value from then on.
type varintReader struct {
	b   []byte
	bad bool
}

// varint reads a signed varint: binary.AppendVarint's zigzag form of an unsigned one.
func (r *varintReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *varintReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || r.bad {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *varintReader) str() string {
	l := r.uvarint()
	if r.bad || uint64(len(r.b)) < l {
		r.bad = true
		return ""
	}
	s := string(r.b[:l])
	r.b = r.b[l:]
	return s
}

// depSpanRow is depRow for a span row of sp as spanRow writes it.
func (s *Store) depSpanRow(sp *model.Span) *depRow {
	if !s.deps.aggregate {
		return nil
	}
	r := &depRow{low: int64(sp.TraceID.Low), id: int64(sp.ID), parent: int64(sp.ParentID), ts: max(sp.Timestamp, 0), shared: sp.Shared}
	if s.feat.traceIDHigh {
		r.high = int64(sp.TraceID.High)
	}
	return r
}

// depAnnRow is depRow for an annotation row when the linker reads its key.
func (s *Store) depAnnRow(high, low, id int64, key string, aType, ts int64, service any) *depRow {
	if !s.deps.aggregate || depKey(key) == "" {
		return nil
	}
	svc, _ := service.(string)
	return &depRow{ann: true, high: high, low: low, id: id, ts: ts, key: key, aType: aType, service: svc}
}

// queueRow encodes the depRows of a batch (its span rows, shared span
// rows and annotation rows, in the order writeTx runs them), nil when
// there are none.
func queueRow(b *batch) []byte {
	var out []byte
	for _, l := range [][]*depRow{b.spanDeps, b.sharedDeps, b.annDeps} {
		for _, r := range l {
			if r != nil {
				out = appendDepRows(out, []*depRow{r})
			}
		}
	}
	return out
}

// enqueueDeps adds the batch's queue row in its transaction.
func (s *Store) enqueueDeps(ctx context.Context, tx *sql.Tx, b *batch) error {
	if !s.deps.aggregate {
		return nil
	}
	row := queueRow(b)
	if len(row) == 0 {
		return nil
	}
	s.stats.statements.Add(1)
	_, err := tx.ExecContext(stmtname.With(ctx, stmtInsertDepQueue),
		"INSERT INTO "+tableDepQueue+" (created, spans) VALUES (?, ?)", time.Now().UnixMicro(), row)
	return err
}

// depTrace is the aggregator's state of one trace (grouped on the low 64
// bits of its ID, as the linker groups traces).
type depTrace struct {
	low   int64
	spans map[[2]int64]*depSpanState // (high, id)
	anns  map[depAnnKey]*depRow
	// What the record counted: its hour (-1 none; -2 unknown: a record
	// of the previous aggregator, counted per day only), day and links.
	oldHour int64
	oldDay  string
	oldLink []depLinkRow
	raw     []byte // the record as read, nil for none
	legacy  bool   // a record without rows: its state is read from the span tables
}

type depSpanState struct {
	high, id, parent, ts int64
}

type depAnnKey struct {
	high, id int64
	key      string // depKey
	ts       int64
}

func newDepTrace(low int64) *depTrace {
	return &depTrace{low: low, spans: map[[2]int64]*depSpanState{}, anns: map[depAnnKey]*depRow{}, oldHour: -1}
}

// apply applies one row as the database applied it.
func (t *depTrace) apply(r depRow) {
	if r.ann {
		k := depAnnKey{r.high, r.id, depKey(r.key), r.ts}
		if _, ok := t.anns[k]; !ok { // INSERT IGNORE: the first wins
			rr := r
			t.anns[k] = &rr
		}
		return
	}
	k := [2]int64{r.high, r.id}
	st := t.spans[k]
	if st == nil {
		t.spans[k] = &depSpanState{high: r.high, id: r.id, parent: r.parent, ts: r.ts}
		return
	}
	if r.parent != 0 { // parent_id = COALESCE(VALUES(parent_id), parent_id)
		st.parent = r.parent
	}
	if !r.shared && r.ts != 0 { // start_ts likewise, except for shared spans
		st.ts = r.ts
	}
}

// rows returns the trace's state as depRows in key order (a record).
func (t *depTrace) rows() []*depRow {
	out := make([]*depRow, 0, len(t.spans)+len(t.anns))
	for _, st := range t.spans {
		out = append(out, &depRow{high: st.high, low: t.low, id: st.id, parent: st.parent, ts: st.ts})
	}
	for _, a := range t.anns {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *depRow) int {
		return cmp.Or(cmpBool(a.ann, b.ann), cmp.Compare(a.high, b.high), cmp.Compare(a.id, b.id),
			strings.Compare(a.key, b.key), cmp.Compare(a.ts, b.ts))
	})
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// link returns the trace's links and its earliest span start_ts (0 for
// none), as the on-demand linker computes them from the stored rows: spans
// in span ID order, each with the annotation rows of its ID.
func (t *depTrace) link() ([]model.DependencyLink, int64) {
	spans := make([]*depSpanState, 0, len(t.spans))
	for _, st := range t.spans {
		spans = append(spans, st)
	}
	slices.SortFunc(spans, func(a, b *depSpanState) int {
		return cmp.Or(cmp.Compare(uint64(a.id), uint64(b.id)), cmp.Compare(a.high, b.high))
	})
	anns := map[int64][]*depRow{}
	for _, a := range t.anns {
		anns[a.id] = append(anns[a.id], a)
	}
	for _, l := range anns {
		slices.SortFunc(l, func(a, b *depRow) int {
			return cmp.Or(cmp.Compare(a.high, b.high), strings.Compare(a.key, b.key), cmp.Compare(a.ts, b.ts))
		})
	}
	var sc depScanner
	var links []model.DependencyLink
	var firstTs int64
	for _, st := range spans {
		if len(t.spans) > 0 && sc.trace.Low == 0 {
			sc.trace = model.TraceID{High: uint64(spans[0].high), Low: uint64(t.low)}
		}
		if st.ts > 0 && (firstTs == 0 || st.ts < firstTs) {
			firstTs = st.ts
		}
		l := anns[st.id]
		if len(l) == 0 {
			sc.row(st.id, st.parent, "", 0, "")
			continue
		}
		for _, a := range l {
			sc.row(st.id, st.parent, a.key, a.aType, a.service)
		}
	}
	if spans := sc.done(); len(spans) > 0 {
		var l dependencyLinker
		l.putTrace(spans)
		links = l.links
	}
	return links, firstTs
}

// depScanner turns the dependency rows of one trace, ordered by span ID,
// into the minimal spans the linker needs (the body of
// scanDependencyRows).
type depScanner struct {
	trace model.TraceID
	spans []model.Span
	cur   *depSpan
}

func (d *depScanner) flush() {
	if d.cur != nil {
		d.spans = append(d.spans, d.cur.span(d.trace))
		d.cur = nil
	}
}

func (d *depScanner) row(id, parent int64, key string, aType int64, svc string) {
	if d.cur == nil || uint64(id) != uint64(d.cur.id) {
		d.flush()
		d.cur = &depSpan{id: model.ID(uint64(id)), parent: model.ID(uint64(parent))}
	}
	if key == "" || svc == "" {
		return // neither client nor server
	}
	cur := d.cur
	switch key {
	case "lc":
		cur.lc = svc
	case "ca":
		cur.ca = svc
	case "cs":
		cur.cs = svc
	case "ma":
		cur.ma = svc
	case "mr":
		cur.mr = svc
	case "ms":
		cur.ms = svc
	case "sa":
		cur.sa = svc
	case "sr":
		cur.sr = svc
	case "error":
		// A span is in error when it has the tag, not an annotation.
		if aType == aTypeString {
			cur.isError = true
		}
	}
}

func (d *depScanner) done() []model.Span {
	d.flush()
	return d.spans
}

// depBucket is a difference to one day's and one hour's link.
type depHourKey struct {
	hour          int64
	parent, child string
}

type depDayKey struct{ day, parent, child string }

// depDiff sums differences per day and per hour.
type depDiff struct {
	days  map[depDayKey]*[2]int64
	hours map[depHourKey]*[2]int64
}

func newDepDiff() *depDiff {
	return &depDiff{days: map[depDayKey]*[2]int64{}, hours: map[depHourKey]*[2]int64{}}
}

func (d *depDiff) add(day string, hour int64, parent, child string, calls, errs int64) {
	if day != "" {
		k := depDayKey{day, parent, child}
		v := d.days[k]
		if v == nil {
			v = new([2]int64)
			d.days[k] = v
		}
		v[0] += calls
		v[1] += errs
	}
	if hour >= 0 {
		k := depHourKey{hour, parent, child}
		v := d.hours[k]
		if v == nil {
			v = new([2]int64)
			d.hours[k] = v
		}
		v[0] += calls
		v[1] += errs
	}
}

// hourOf returns the epoch hour of a start_ts in microseconds.
func hourOf(ts int64) int64 { return floorDiv(ts, hourMicros) }

// dayOfHour returns the UTC day of an epoch hour.
func dayOfHour(h int64) string { return epochDay(h * 3_600_000) }

// settle computes t's new links and adds the difference from its record
// to diff; it returns the new record.
func (t *depTrace) settle(diff *depDiff) []byte {
	links, first := t.link()
	hour, day := int64(-1), ""
	if first > 0 {
		hour = hourOf(first)
		day = dayOfHour(hour)
	} else {
		links = nil // a trace without a timestamp counts on no day
	}
	oldHour := t.oldHour
	if oldHour == -2 { // counted per day only
		oldHour = -1
	}
	if t.oldDay != "" {
		for _, l := range t.oldLink {
			diff.add(t.oldDay, oldHour, l.parent, l.child, -l.calls, -l.errs)
		}
	}
	if day != "" {
		for _, l := range links {
			diff.add(day, hour, l.Parent, l.Child, l.CallCount, l.ErrorCount)
		}
	}
	return encodeRecordV2(day, hour, links, t.rows())
}

// Record format of zipkin_dependency_traces.links written by this version:
// a marker byte, then the hour (varint, -1 none), the links (count,
// then parent, child, calls, errors each) and the trace's depRows.
const recordV2 = 0x02

func encodeRecordV2(day string, hour int64, links []model.DependencyLink, rows []*depRow) []byte {
	b := []byte{recordV2}
	b = binary.AppendVarint(b, hour)
	b = binary.AppendUvarint(b, uint64(len(links)))
	for _, l := range links {
		b = binary.AppendUvarint(b, uint64(len(l.Parent)))
		b = append(b, l.Parent...)
		b = binary.AppendUvarint(b, uint64(len(l.Child)))
		b = append(b, l.Child...)
		b = binary.AppendVarint(b, l.CallCount)
		b = binary.AppendVarint(b, l.ErrorCount)
	}
	_ = day // the day is the hour's; the record's day column holds it
	return appendDepRows(b, rows)
}

// readRecord loads a record into t (raw as read from the links column,
// day the day column).
func (t *depTrace) readRecord(raw []byte, day string) error {
	t.raw = slices.Clone(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] != recordV2 {
		// The previous aggregator's JSON: links counted per day.
		rec, err := decodeRecord(raw)
		if err != nil {
			return err
		}
		t.oldDay, t.oldLink, t.oldHour, t.legacy = rec.Day, rec.parse, -2, true
		return nil
	}
	rd := varintReader{b: raw[1:]}
	t.oldHour = rd.varint()
	nl := rd.uvarint()
	for i := uint64(0); i < nl && !rd.bad; i++ {
		p, c := rd.str(), rd.str()
		calls, errs := rd.varint(), rd.varint()
		t.oldLink = append(t.oldLink, depLinkRow{p, c, calls, errs})
	}
	if rd.bad {
		return errDepRows
	}
	t.oldDay = day
	if t.oldHour >= 0 {
		t.oldDay = dayOfHour(t.oldHour)
	}
	rows, err := decodeDepRows(rd.b, nil)
	if err != nil {
		return err
	}
	for _, r := range rows {
		r.low = t.low
		t.apply(r)
	}
	return nil
}

// queueBatch is what one drain (or one exact read) took from the queue.
type queueBatch struct {
	seqs    []any
	oldest  int64 // created of the oldest row, µs
	traces  map[int64]*depTrace
	order   []int64 // trace lows, sorted
	pending [][]depRow
}

// readQueue reads up to limit queue rows (0: all) in seq order, with FOR
// UPDATE when lock is set, decoding their rows.
func (s *Store) readQueue(ctx context.Context, q queryer, limit int, lock bool) (*queueBatch, error) {
	query := "SELECT seq, created, spans FROM " + tableDepQueue + " ORDER BY seq"
	var args []any
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit)
	}
	if lock {
		query += " FOR UPDATE"
	}
	rows, err := q.QueryContext(stmtname.With(ctx, stmtSelectDepQueue), query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", tableDepQueue, err)
	}
	defer rows.Close()
	qb := &queueBatch{traces: map[int64]*depTrace{}}
	for rows.Next() {
		var seq, created int64
		var blob []byte
		if err := rows.Scan(&seq, &created, &blob); err != nil {
			return nil, fmt.Errorf("reading %s: %w", tableDepQueue, err)
		}
		dr, err := decodeDepRows(blob, nil)
		if err != nil {
			return nil, err
		}
		if len(qb.seqs) == 0 || created < qb.oldest {
			qb.oldest = created
		}
		qb.seqs = append(qb.seqs, seq)
		qb.pending = append(qb.pending, dr)
		for _, r := range dr {
			if qb.traces[r.low] == nil {
				qb.traces[r.low] = newDepTrace(r.low)
				qb.order = append(qb.order, r.low)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", tableDepQueue, err)
	}
	slices.Sort(qb.order)
	return qb, nil
}

// queryer is *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// loadTraces reads the records of qb's traces, the span tables' rows of
// traces with a record of the previous aggregator (which kept no rows),
// then applies the queued rows in order.
func (s *Store) loadTraces(ctx context.Context, q queryer, qb *queueBatch) error {
	if err := s.readRecords(ctx, q, qb.order, qb.traces); err != nil {
		return err
	}
	var legacy []int64
	for _, low := range qb.order {
		if qb.traces[low].legacy {
			legacy = append(legacy, low)
		}
	}
	if err := s.readSpanRows(ctx, q, legacy, qb.traces); err != nil {
		return err
	}
	for _, dr := range qb.pending {
		for _, r := range dr {
			qb.traces[r.low].apply(r)
		}
	}
	return nil
}

// readRecords reads the records of traces lows into ts.
func (s *Store) readRecords(ctx context.Context, q queryer, lows []int64, ts map[int64]*depTrace) error {
	for start := 0; start < len(lows); start += 500 {
		part := lows[start:min(start+500, len(lows))]
		args := make([]any, len(part))
		for i, l := range part {
			args[i] = l
		}
		rows, err := q.QueryContext(stmtname.With(ctx, stmtSelectDepTraces),
			"SELECT trace_id, day, links FROM "+tableDepTraces+" WHERE trace_id IN ("+placeholders(len(part))+")", args...)
		if err != nil {
			return fmt.Errorf("reading %s: %w", tableDepTraces, err)
		}
		for rows.Next() {
			var low int64
			var day any
			var raw []byte
			if err := rows.Scan(&low, &day, &raw); err != nil {
				rows.Close()
				return fmt.Errorf("reading %s: %w", tableDepTraces, err)
			}
			d := ""
			if day != nil {
				if d, err = dayString(day); err != nil {
					rows.Close()
					return err
				}
			}
			if t := ts[low]; t != nil {
				if err := t.readRecord(raw, d); err != nil {
					rows.Close()
					return err
				}
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w", tableDepTraces, err)
		}
	}
	return nil
}

// readSpanRows reads the stored rows of traces lows from the span tables
// into ts (the state of a trace whose record keeps none: counted by the
// previous aggregator, or BackfillDependencies).
func (s *Store) readSpanRows(ctx context.Context, q queryer, lows []int64, ts map[int64]*depTrace) error {
	high := "s.trace_id_high"
	if !s.feat.traceIDHigh {
		high = "0"
	}
	for start := 0; start < len(lows); start += depChunk {
		part := lows[start:min(start+depChunk, len(lows))]
		args := append([]any{}, dependencyKeys[:]...)
		for _, l := range part {
			args = append(args, l)
		}
		query := "SELECT " + high + ", s.trace_id, s.parent_id, s.id, s.start_ts, a.a_key, a.a_type, a.a_timestamp, a.endpoint_service_name FROM " +
			tableSpans + " s LEFT JOIN " + tableAnnotations + " a ON s.trace_id = a.trace_id AND s.id = a.span_id" +
			" AND a.a_key IN (?, ?, ?, ?, ?, ?, ?, ?, ?) WHERE s.trace_id IN (" + placeholders(len(part)) + ")"
		rows, err := q.QueryContext(stmtname.With(ctx, stmtSelectTraceSpans), query, args...)
		if err != nil {
			return fmt.Errorf("reading the spans of %d traces: %w", len(part), err)
		}
		for rows.Next() {
			var hi, lo, id int64
			var parent, startTs, aType, aTs sql.NullInt64
			var key, svc sql.NullString
			if err := rows.Scan(&hi, &lo, &parent, &id, &startTs, &key, &aType, &aTs, &svc); err != nil {
				rows.Close()
				return fmt.Errorf("reading the spans of %d traces: %w", len(part), err)
			}
			t := ts[lo]
			if t == nil {
				continue
			}
			t.apply(depRow{high: hi, low: lo, id: id, parent: parent.Int64, ts: startTs.Int64})
			if key.Valid {
				// The annotation's own high half is not read: rows join on
				// the low half, as the on-demand linker joins them.
				t.apply(depRow{ann: true, high: hi, low: lo, id: id, ts: aTs.Int64, key: key.String, aType: aType.Int64, service: svc.String})
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("reading the spans of %d traces: %w", len(part), err)
		}
	}
	return nil
}

// DrainDependencies runs the dependency aggregator over every queued write
// (see the top of deps_queue.go), in transactions of up to 64 queued
// writes, until the queue is empty; it returns how many queued writes it
// took. The store drains by itself after writes and on
// RunDependencyAggregation's timer; call it to have zipkin_dependencies
// current for Zipkin's own readers at once (GetDependencies needs no
// drain: it counts queued writes itself). Without aggregation it does
// nothing.
func (s *Store) DrainDependencies(ctx context.Context) (int, error) {
	if !s.deps.aggregate {
		return 0, nil
	}
	select {
	case s.deps.folding <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-s.deps.folding }()
	return s.drainLocked(ctx, 0)
}

// drainLocked drains (at most maxTx transactions when positive) with the
// drain semaphore held.
func (s *Store) drainLocked(ctx context.Context, maxTx int) (int, error) {
	total := 0
	for i := 0; maxTx <= 0 || i < maxTx; i++ {
		n, err := s.drainOnce(ctx)
		total += n
		if err != nil {
			return total, err
		}
		if n < drainRows {
			break
		}
	}
	if s.deps.pending {
		if _, err := s.foldAll(ctx); err != nil {
			return total, err
		}
	}
	return total, nil
}

// drainOnce aggregates up to drainRows queue rows in one transaction.
func (s *Store) drainOnce(ctx context.Context) (int, error) {
	took := 0
	err := retry.Tx(ctx, s.db, nil, s.writePolicy(), func(ctx context.Context, tx *sql.Tx) error {
		took = 0
		dctx := stmtname.With(ctx, stmtDrainDepQueue)
		qb, err := s.readQueue(ctx, tx, drainRows, true)
		if err != nil {
			return err
		}
		if len(qb.seqs) == 0 {
			return nil
		}
		// Take the rows first: the transaction's own write, which the
		// check below reads back.
		res, err := tx.ExecContext(dctx, "DELETE FROM "+tableDepQueue+" WHERE seq IN ("+placeholders(len(qb.seqs))+")", qb.seqs...)
		if err != nil {
			return fmt.Errorf("deleting from %s: %w", tableDepQueue, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(qb.seqs)) {
			return s.txLost(ctx, fmt.Sprintf("%s: deleted %d of the %d rows it had locked", tableDepQueue, n, len(qb.seqs)))
		}
		if err := s.loadTraces(ctx, tx, qb); err != nil {
			return err
		}
		// The reads above answer empty, without an error, when the server
		// rolled the transaction back underneath (txLostError): the
		// deleted rows are then back.
		var left int64
		if err := tx.QueryRowContext(dctx, "SELECT COUNT(*) FROM "+tableDepQueue+" WHERE seq IN ("+placeholders(len(qb.seqs))+")",
			qb.seqs...).Scan(&left); err != nil {
			return fmt.Errorf("checking %s: %w", tableDepQueue, err)
		}
		if left != 0 {
			return s.txLost(ctx, fmt.Sprintf("%s: %d of the %d rows it had deleted", tableDepQueue, left, len(qb.seqs)))
		}
		diff := newDepDiff()
		var recArgs []any
		nRec := 0
		for _, low := range qb.order {
			t := qb.traces[low]
			rec := t.settle(diff)
			if string(rec) == string(t.raw) {
				continue
			}
			var day any
			if hour := recordHour(rec); hour >= 0 {
				day = dayOfHour(hour)
			}
			recArgs = append(recArgs, low, day, rec)
			nRec++
		}
		for start := 0; start < nRec; start += 500 {
			n := min(500, nRec-start)
			s.stats.statements.Add(1)
			if _, err := tx.ExecContext(stmtname.With(ctx, stmtUpdateDepTraces),
				"INSERT INTO "+tableDepTraces+" (trace_id, day, links) VALUES "+values(3, n)+
					" ON DUPLICATE KEY UPDATE day = VALUES(day), links = VALUES(links)", recArgs[start*3:(start+n)*3]...); err != nil {
				return fmt.Errorf("writing %s: %w", tableDepTraces, err)
			}
		}
		if err := s.applyDiff(dctx, tx, diff); err != nil {
			return err
		}
		took = len(qb.seqs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: aggregating dependencies: %w", err)
	}
	return took, nil
}

// recordHour returns the hour of an encoded record.
func recordHour(rec []byte) int64 {
	if len(rec) < 2 || rec[0] != recordV2 {
		return -1
	}
	h, n := binary.Varint(rec[1:])
	if n <= 0 {
		return -1
	}
	return h
}

// applyDiff adds diff to zipkin_dependencies and zipkin_dependency_hours
// (in key order) and deletes the rows it brought to zero.
func (s *Store) applyDiff(ctx context.Context, tx *sql.Tx, diff *depDiff) error {
	dayKeys := make([]depDayKey, 0, len(diff.days))
	for k, v := range diff.days {
		if v[0] != 0 || v[1] != 0 {
			dayKeys = append(dayKeys, k)
		}
	}
	slices.SortFunc(dayKeys, func(a, b depDayKey) int {
		return cmp.Or(strings.Compare(a.day, b.day), strings.Compare(a.parent, b.parent), strings.Compare(a.child, b.child))
	})
	var args, days []any
	for _, k := range dayKeys {
		v := diff.days[k]
		args = append(args, k.day, k.parent, k.child, v[0], v[1])
		if len(days) == 0 || days[len(days)-1] != k.day {
			days = append(days, k.day)
		}
	}
	if err := addDepCounts(ctx, tx, tableDependencies, "day", true, args, days); err != nil {
		return err
	}
	if !s.deps.hours {
		return nil
	}
	hourKeys := make([]depHourKey, 0, len(diff.hours))
	for k, v := range diff.hours {
		if v[0] != 0 || v[1] != 0 {
			hourKeys = append(hourKeys, k)
		}
	}
	slices.SortFunc(hourKeys, func(a, b depHourKey) int {
		return cmp.Or(cmp.Compare(a.hour, b.hour), strings.Compare(a.parent, b.parent), strings.Compare(a.child, b.child))
	})
	args = args[:0]
	var hours []any
	for _, k := range hourKeys {
		v := diff.hours[k]
		args = append(args, k.hour, k.parent, k.child, v[0], v[1])
		if len(hours) == 0 || hours[len(hours)-1] != k.hour {
			hours = append(hours, k.hour)
		}
	}
	if err := addDepCounts(ctx, tx, tableDepHours, "hour", false, args, hours); err != nil {
		return err
	}
	return nil
}

// queuedDiff returns the differences the traces still queued would make,
// read in q (GetDependencies' snapshot).
func (s *Store) queuedDiff(ctx context.Context, q queryer) (*depDiff, error) {
	diff := newDepDiff()
	qb, err := s.readQueue(ctx, q, 0, false)
	if err != nil || len(qb.seqs) == 0 {
		return diff, err
	}
	if err := s.loadTraces(ctx, q, qb); err != nil {
		return nil, err
	}
	for _, low := range qb.order {
		qb.traces[low].settle(diff)
	}
	return diff, nil
}

// DependencyLag returns the age of the oldest write the dependency
// aggregator has not drained yet (0 when none). zipkin_dependencies lags
// the writes by that much for Zipkin's own readers; GetDependencies does
// not. Without aggregation it returns 0.
func (s *Store) DependencyLag(ctx context.Context) (time.Duration, error) {
	if !s.deps.aggregate {
		return 0, nil
	}
	var created int64
	err := s.db.QueryRowContext(stmtname.With(ctx, stmtSelectDepQueue),
		"SELECT created FROM "+tableDepQueue+" ORDER BY seq LIMIT 1").Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: reading the dependency lag: %w", err)
	}
	return max(time.Since(time.UnixMicro(created)), 0), nil
}

// RunDependencyAggregation drains the dependency queue every interval
// (zero: Options.DependencyFoldInterval's default, 3 s) until ctx ends, so
// that the lag stays bounded when writes stop; it returns ctx's error. A
// failed drain is logged and tried again at the next tick. Without
// aggregation it returns at once with nil.
func (s *Store) RunDependencyAggregation(ctx context.Context, interval time.Duration) error {
	if !s.deps.aggregate {
		return nil
	}
	if interval <= 0 {
		interval = defaultFoldInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		select {
		case s.deps.folding <- struct{}{}:
		default:
			continue // a drain runs
		}
		s.deps.lastFold.Store(time.Now().UnixNano())
		_, err := s.drainLocked(ctx, 0)
		<-s.deps.folding
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "mysqlstore: draining the dependency queue failed; its rows stay queued (GetDependencies counts them) and the next drain takes them", "err", err)
		}
	}
}

// addDepCounts adds rows of (bucket, parent, child, calls, errors), flattened in args, to the
// counts of table, whose bucket column is col, in statements of up to 500 rows, then deletes the
// links of the touched buckets that dropped to zero. nullable: Zipkin's zipkin_dependencies,
// whose counts may be NULL.
func addDepCounts(ctx context.Context, tx *sql.Tx, table, col string, nullable bool, args, buckets []any) error {
	calls, errs := "call_count", "error_count"
	if nullable {
		calls, errs = "COALESCE(call_count, 0)", "COALESCE(error_count, 0)"
	}
	rows := len(args) / 5
	for start := 0; start < rows; start += 500 {
		n := min(500, rows-start)
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+
			" ("+col+", parent, child, call_count, error_count) VALUES "+values(5, n)+
			" ON DUPLICATE KEY UPDATE call_count = "+calls+" + VALUES(call_count),"+
			" error_count = "+errs+" + VALUES(error_count)", args[start*5:(start+n)*5]...); err != nil {
			return fmt.Errorf("writing %s: %w", table, err)
		}
	}
	if len(buckets) > 0 {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE "+col+" IN ("+placeholders(len(buckets))+
			") AND call_count <= 0 AND "+errs+" <= 0", buckets...); err != nil {
			return fmt.Errorf("writing %s: %w", table, err)
		}
	}
	return nil
}
