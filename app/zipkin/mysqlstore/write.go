package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/retry"
	"github.com/sqlpool/sqlpool/stmtname"
)

// batchSizes are the only row counts a multi-row INSERT has, largest first,
// so that each table needs at most len(batchSizes) distinct statements per
// shape and the pool's statement cache (64 per connection by default) keeps
// them all prepared. A chunk of n rows is split greedily: at most three
// statements per decade (9 = 5+2+2, 137 = 100+20+10+5+2).
var batchSizes = [...]int{500, 200, 100, 50, 20, 10, 5, 2, 1}

// maxPlaceholders is MySQL's limit on the parameters of one prepared
// statement.
const maxPlaceholders = 65535

// maxDriverPacket is go-sql-driver/mysql's default maxAllowedPacket (64 MiB):
// the driver refuses larger packets unless configured otherwise, whatever the
// server allows.
const maxDriverPacket = 64 << 20

// Column limits of Zipkin's schema.
const (
	maxVarcharChars = 255   // VARCHAR(255): characters
	maxBlobBytes    = 65535 // BLOB: bytes
)

// Statement names for the SQL timers of package metrics.
const (
	stmtInsertSpans       = "insert zipkin_spans"
	stmtInsertAnnotations = "insert zipkin_annotations"
)

// a_type values of zipkin_annotations.
const (
	aTypeAnnotation = -1 // timeline annotation: a_key is its value
	aTypeBool       = 0  // address row (sa, ca, ma): a_value is 0x01
	aTypeString     = 6  // tag, or the "lc" marker
)

// writeSQL holds the INSERT statements for one set of schema features,
// indexed like batchSizes.
type writeSQL struct {
	spanCols, annCols int // columns per row
	spans             [len(batchSizes)]string
	spansShared       [len(batchSizes)]string
	annotations       [len(batchSizes)]string
	serviceSpans      [len(batchSizes)]string // schema addition (additions.go)
}

func newWriteSQL(f features) *writeSQL {
	spanCols := []string{"trace_id", "id", "name"}
	if f.traceIDHigh {
		spanCols = append([]string{"trace_id_high"}, spanCols...)
	}
	if f.remoteServiceName {
		spanCols = append(spanCols, "remote_service_name")
	}
	spanCols = append(spanCols, "parent_id", "debug", "start_ts", "duration")

	annCols := []string{"trace_id", "span_id", "a_key", "a_value", "a_type", "a_timestamp", "endpoint_ipv4"}
	if f.traceIDHigh {
		annCols = append([]string{"trace_id_high"}, annCols...)
	}
	if f.ipv6 {
		annCols = append(annCols, "endpoint_ipv6")
	}
	annCols = append(annCols, "endpoint_port", "endpoint_service_name")

	// What Zipkin updates when a span row exists (reference §2): name and
	// remote_service_name unless absent (written as ""), parent_id and
	// duration when set; start_ts only for a span that is not shared (the
	// client's timestamp wins over the server's); debug and the key never.
	update := " ON DUPLICATE KEY UPDATE name = IF(VALUES(name) = '', name, VALUES(name))"
	if f.remoteServiceName {
		update += ", remote_service_name = IF(VALUES(remote_service_name) = '', remote_service_name, VALUES(remote_service_name))"
	}
	update += ", parent_id = COALESCE(VALUES(parent_id), parent_id), duration = COALESCE(VALUES(duration), duration)"
	updateStart := update + ", start_ts = COALESCE(VALUES(start_ts), start_ts)"

	w := &writeSQL{spanCols: len(spanCols), annCols: len(annCols), serviceSpans: serviceSpansSQL()}
	for i, n := range batchSizes {
		head := "INSERT INTO " + tableSpans + " (" + strings.Join(spanCols, ", ") + ") VALUES " + values(len(spanCols), n)
		w.spans[i] = head + updateStart
		w.spansShared[i] = head + update
		w.annotations[i] = "INSERT IGNORE INTO " + tableAnnotations + " (" + strings.Join(annCols, ", ") + ") VALUES " +
			values(len(annCols), n)
	}
	return w
}

// values returns "(?, …), …" for rows rows of cols placeholders.
func values(cols, rows int) string {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	var b strings.Builder
	b.Grow(rows * (len(row) + 2))
	for i := 0; i < rows; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// SpanError is one span Accept refused.
type SpanError struct {
	Index   int // position in the batch
	TraceID model.TraceID
	ID      model.ID
	Reason  string
}

// InvalidSpansError reports the spans of a batch that Accept refused; the
// other spans of the batch were stored (unless the error is joined with a
// write error).
type InvalidSpansError struct {
	Spans []SpanError
}

func (e *InvalidSpansError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mysqlstore: %d span(s) not stored", len(e.Spans))
	for i, s := range e.Spans {
		if i == 10 {
			fmt.Fprintf(&b, "; and %d more", len(e.Spans)-i)
			break
		}
		fmt.Fprintf(&b, "; span %d (traceId %s, id %s): %s", s.Index, s.TraceID, s.ID, s.Reason)
	}
	return b.String()
}

// batch is one Accept call turned into rows, in primary-key order, as flat
// argument slices (row i of a table is args[i*cols:(i+1)*cols]).
type batch struct {
	spans       int
	spanArgs    []any // spans that are not shared
	spanBytes   []int // estimated packet bytes per row
	sharedArgs  []any
	sharedBytes []int
	annArgs     []any
	annBytes    []int
	add         *additionRows // rows of the schema additions, if in use
	// The dependency aggregator's view of each row (deps_queue.go), aligned
	// with the rows; nil entries (and nil slices) without aggregation.
	spanDeps, sharedDeps, annDeps []*depRow
}

type spanRow struct {
	high, low, id int64
	shared        bool
	args          []any
	bytes         int
	dep           *depRow
}

type annRow struct {
	high, low, span int64
	key             string
	ts              int64
	args            []any
	bytes           int
	dep             *depRow
}

// Accept stores spans in one transaction per call, run through retry.Tx:
// a deadlock or a connection lost before COMMIT runs the whole transaction
// again. Writes are idempotent (INSERT … ON DUPLICATE KEY UPDATE for spans,
// INSERT IGNORE for annotations), so a span sent again is stored once and an
// ambiguous commit is replayed (up to Options.MaxAmbiguousReplays) rather
// than reported as lost. nil means every valid span is durable.
//
// Spans must be normalised (model.Span.Normalize). Values that do not fit
// Zipkin's columns are stored changed, never refused: characters outside
// the Basic Multilingual Plane (emoji) and invalid UTF-8 in VARCHAR columns
// (names, service names, tag keys, annotation values) become U+FFFD, those
// columns are cut to 255 characters, and tag values (BLOB) keep their exact
// bytes cut to 65,535 bytes on a character boundary. A span with a zero
// trace ID or span ID, or an unknown kind, is not stored: Accept stores the
// rest and returns an *InvalidSpansError naming it by index.
func (s *Store) Accept(ctx context.Context, spans []model.Span) error {
	if len(spans) == 0 {
		return nil
	}
	valid, invalid := validSpans(spans)
	var werr error
	if len(valid) > 0 {
		werr = s.writeGrouped(ctx, valid)
	}
	if werr != nil {
		s.stats.failures.Add(1)
	} else if len(valid) > 0 {
		s.stats.batches.Add(1)
		s.stats.spans.Add(int64(len(valid)))
	}
	if invalid != nil {
		s.stats.rejected.Add(int64(len(invalid.Spans)))
		return errors.Join(werr, invalid)
	}
	return werr
}

// validSpans returns the spans Accept stores (spans itself when all are
// valid) and the error naming the others by index, or nil.
func validSpans(spans []model.Span) ([]model.Span, *InvalidSpansError) {
	var invalid *InvalidSpansError
	for i := range spans {
		if reason := invalidReason(&spans[i]); reason != "" {
			if invalid == nil {
				invalid = &InvalidSpansError{}
			}
			invalid.Spans = append(invalid.Spans, SpanError{Index: i, TraceID: spans[i].TraceID, ID: spans[i].ID, Reason: reason})
		}
	}
	if invalid == nil {
		return spans, nil
	}
	valid := make([]model.Span, 0, len(spans)-len(invalid.Spans))
	for i := range spans {
		if invalidReason(&spans[i]) == "" {
			valid = append(valid, spans[i])
		}
	}
	return valid, invalid
}

// writeSpans builds the rows of valid spans and writes them.
func (s *Store) writeSpans(ctx context.Context, spans []model.Span) error {
	b, _ := s.buildBatch(spans)
	if b.spans == 0 {
		return nil
	}
	return s.write(ctx, b)
}

// write runs the batch's transaction (or, with Options.MaxTxRows, its
// transactions in turn), replaying each after an ambiguous commit.
func (s *Store) write(ctx context.Context, b *batch) error {
	for _, part := range s.splitBatch(b) {
		if err := s.writeOne(ctx, part); err != nil {
			return err
		}
	}
	return nil
}

// splitBatch divides b into batches of at most Options.MaxTxRows rows of
// zipkin_spans and zipkin_annotations each (rows keep their key order; the
// rows of one span may land in two parts), the schema additions' rows in
// the last. Without MaxTxRows, or when b fits, it returns b alone.
func (s *Store) splitBatch(b *batch) []*batch {
	limit := s.opts.MaxTxRows
	nSpans, nShared, nAnn := len(b.spanBytes), len(b.sharedBytes), len(b.annBytes)
	if limit <= 0 || nSpans+nShared+nAnn <= limit {
		return []*batch{b}
	}
	type list struct {
		args  []any
		bytes []int
		deps  []*depRow
		cols  int
		which int // 0 spans, 1 shared, 2 annotations
	}
	lists := []list{
		{b.spanArgs, b.spanBytes, b.spanDeps, s.w.spanCols, 0},
		{b.sharedArgs, b.sharedBytes, b.sharedDeps, s.w.spanCols, 1},
		{b.annArgs, b.annBytes, b.annDeps, s.w.annCols, 2},
	}
	var parts []*batch
	cur, room := &batch{}, limit
	for _, l := range lists {
		for len(l.bytes) > 0 {
			k := min(room, len(l.bytes))
			a, by := l.args[:k*l.cols:k*l.cols], l.bytes[:k:k]
			var d []*depRow
			if l.deps != nil {
				d = l.deps[:k:k]
				l.deps = l.deps[k:]
			}
			switch l.which {
			case 0:
				cur.spanArgs, cur.spanBytes, cur.spanDeps = a, by, d
			case 1:
				cur.sharedArgs, cur.sharedBytes, cur.sharedDeps = a, by, d
			default:
				cur.annArgs, cur.annBytes, cur.annDeps = a, by, d
			}
			l.args, l.bytes = l.args[k*l.cols:], l.bytes[k:]
			room -= k
			if room == 0 {
				parts = append(parts, cur)
				cur, room = &batch{}, limit
			}
		}
	}
	if room < limit {
		parts = append(parts, cur)
	}
	last := parts[len(parts)-1]
	last.add = b.add
	for _, p := range parts {
		p.spans = b.spans // for messages: the Accept call's span count
	}
	return parts
}

// writeOne runs one batch's transaction, replaying it after an ambiguous
// commit.
func (s *Store) writeOne(ctx context.Context, b *batch) error {
	maxReplays := s.opts.MaxAmbiguousReplays
	if maxReplays == 0 {
		maxReplays = 3
	}
	for replays := 0; ; replays++ {
		err := retry.Tx(ctx, s.db, nil, s.writePolicy(), func(ctx context.Context, tx *sql.Tx) error {
			return s.writeTx(ctx, tx, b)
		})
		if err == nil {
			s.rememberNames(b)
			s.maybeDrain(ctx)
			return nil
		}
		if !errors.Is(err, retry.ErrAmbiguousCommit) {
			return fmt.Errorf("mysqlstore: storing %d spans: %w", b.spans, err)
		}
		s.stats.ambiguous.Add(1)
		if replays >= maxReplays || ctx.Err() != nil {
			return fmt.Errorf("mysqlstore: storing %d spans: commit outcome unknown after %d replays: %w",
				b.spans, replays, err)
		}
		s.stats.replays.Add(1)
		s.log.InfoContext(ctx, "mysqlstore: commit outcome unknown; writing the batch again (idempotent)",
			"spans", b.spans, "replay", replays+1, "err", err)
	}
}

func (s *Store) writeTx(ctx context.Context, tx *sql.Tx, b *batch) error {
	sctx := stmtname.With(ctx, stmtInsertSpans)
	if err := s.execChunks(sctx, tx, &s.w.spans, s.w.spanCols, b.spanArgs, b.spanBytes); err != nil {
		return err
	}
	if err := s.execChunks(sctx, tx, &s.w.spansShared, s.w.spanCols, b.sharedArgs, b.sharedBytes); err != nil {
		return err
	}
	actx := stmtname.With(ctx, stmtInsertAnnotations)
	if err := s.execChunks(actx, tx, &s.w.annotations, s.w.annCols, b.annArgs, b.annBytes); err != nil {
		return err
	}
	if err := s.writeAdditions(ctx, tx, b); err != nil {
		return err
	}
	return s.enqueueDeps(ctx, tx, b)
}

// packetBudget is how many bytes of parameters one statement may carry:
// three quarters of the smaller of max_allowed_packet and the driver's
// default limit, leaving room for the SQL text and the protocol's framing.
func (s *Store) packetBudget() int {
	m := s.maxPacket
	if m <= 0 || m > maxDriverPacket {
		m = maxDriverPacket
	}
	return int(m/4*3) - 4096
}

// execChunks inserts rows (flat args, cols per row) with the fixed batch
// sizes, each chunk under the placeholder limit and the packet budget.
func (s *Store) execChunks(ctx context.Context, tx *sql.Tx, stmts *[len(batchSizes)]string, cols int, args []any, bytes []int) error {
	n := len(bytes)
	budget := s.packetBudget()
	for i := 0; i < n; {
		rem := n - i
		k := len(batchSizes) - 1 // one row always goes, whatever its size
		for j, size := range batchSizes {
			if size > rem || size*cols > maxPlaceholders {
				continue
			}
			if size > 1 && sum(bytes[i:i+size]) > budget {
				continue
			}
			k = j
			break
		}
		size := batchSizes[k]
		s.stats.statements.Add(1)
		if _, err := tx.ExecContext(ctx, stmts[k], args[i*cols:(i+size)*cols]...); err != nil {
			return err
		}
		i += size
	}
	return nil
}

func sum(v []int) int {
	t := 0
	for _, x := range v {
		t += x
	}
	return t
}

// buildBatch turns spans into rows (Zipkin's v2 → v1 conversion, reference
// §2) sorted in key order.
func (s *Store) buildBatch(spans []model.Span) (*batch, *InvalidSpansError) {
	var invalid *InvalidSpansError
	spanRows := make([]spanRow, 0, len(spans))
	annRows := make([]annRow, 0, len(spans)*4)
	b := &batch{}
	for i := range spans {
		sp := &spans[i]
		if reason := invalidReason(sp); reason != "" {
			if invalid == nil {
				invalid = &InvalidSpansError{}
			}
			invalid.Spans = append(invalid.Spans, SpanError{Index: i, TraceID: sp.TraceID, ID: sp.ID, Reason: reason})
			continue
		}
		b.spans++
		spanRows = append(spanRows, s.spanRow(sp))
		annRows = s.annotationRows(sp, annRows)
		s.collectAdditions(b, sp)
	}
	// Key order: lock acquisition in one order for every batch makes
	// deadlocks between concurrent batches rarer. Equal keys keep their
	// input order (the later upsert wins, as in Zipkin).
	slices.SortStableFunc(spanRows, func(a, b spanRow) int {
		return cmp.Or(cmp.Compare(a.high, b.high), cmp.Compare(a.low, b.low), cmp.Compare(a.id, b.id))
	})
	slices.SortStableFunc(annRows, func(a, b annRow) int {
		return cmp.Or(cmp.Compare(a.high, b.high), cmp.Compare(a.low, b.low), cmp.Compare(a.span, b.span),
			strings.Compare(a.key, b.key), cmp.Compare(a.ts, b.ts))
	})
	agg := s.deps.aggregate
	for _, r := range spanRows {
		if r.shared {
			b.sharedArgs = append(b.sharedArgs, r.args...)
			b.sharedBytes = append(b.sharedBytes, r.bytes)
			if agg {
				b.sharedDeps = append(b.sharedDeps, r.dep)
			}
		} else {
			b.spanArgs = append(b.spanArgs, r.args...)
			b.spanBytes = append(b.spanBytes, r.bytes)
			if agg {
				b.spanDeps = append(b.spanDeps, r.dep)
			}
		}
	}
	b.annArgs = make([]any, 0, len(annRows)*s.w.annCols)
	b.annBytes = make([]int, 0, len(annRows))
	for _, r := range annRows {
		b.annArgs = append(b.annArgs, r.args...)
		b.annBytes = append(b.annBytes, r.bytes)
		if agg {
			b.annDeps = append(b.annDeps, r.dep)
		}
	}
	s.stats.spanRows.Add(int64(len(spanRows)))
	s.stats.annRows.Add(int64(len(annRows)))
	return b, invalid
}

func invalidReason(sp *model.Span) string {
	switch {
	case sp.TraceID.IsZero():
		return "trace ID is zero"
	case sp.ID == 0:
		return "span ID is zero"
	case !sp.Kind.Valid():
		return fmt.Sprintf("unknown kind %q", string(sp.Kind))
	}
	return ""
}

// argBytes estimates the packet bytes of one parameter: type and length
// prefix, plus the value (twice, in case the driver interpolates and
// escapes it).
func argBytes(v any) int {
	switch v := v.(type) {
	case string:
		return 16 + 2*len(v)
	case []byte:
		return 16 + 2*len(v)
	}
	return 16
}

func rowBytes(args []any) int {
	n := 8
	for _, a := range args {
		n += argBytes(a)
	}
	return n
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// nameOrEmpty applies Zipkin's rule for span and remote service names: an
// absent name or the literal "unknown" is written as "" and never replaces
// a stored name.
func nameOrEmpty(v string) string {
	if v == "unknown" {
		return ""
	}
	return sanitizeVarchar(v)
}

func (s *Store) spanRow(sp *model.Span) spanRow {
	r := spanRow{low: int64(sp.TraceID.Low), id: int64(sp.ID), shared: sp.Shared}
	args := make([]any, 0, s.w.spanCols)
	if s.feat.traceIDHigh {
		r.high = int64(sp.TraceID.High)
		args = append(args, r.high)
	}
	args = append(args, r.low, r.id, nameOrEmpty(sp.Name))
	if s.feat.remoteServiceName {
		args = append(args, nameOrEmpty(sp.RemoteServiceName()))
	}
	var debug any
	if sp.Debug {
		debug = int64(1)
	}
	ts, dur := max(sp.Timestamp, 0), max(sp.Duration, 0)
	if sp.Shared {
		dur = 0 // Zipkin's v1 conversion drops a shared span's duration
	}
	args = append(args, nullInt(int64(sp.ParentID)), debug, nullInt(ts), nullInt(dur))
	r.args = args
	r.bytes = rowBytes(args)
	r.dep = s.depSpanRow(sp)
	return r
}

// inferKind reads a kind from v1-style core annotations when the span has
// none (reference §2).
func inferKind(as []model.Annotation) model.Kind {
	for _, a := range as {
		switch a.Value {
		case "cs", "cr":
			return model.KindClient
		case "sr", "ss":
			return model.KindServer
		case "ms", "ws":
			return model.KindProducer
		case "mr", "wr":
			return model.KindConsumer
		}
	}
	return model.KindUnset
}

// annotationRows appends the zipkin_annotations rows of one span: core
// annotations synthesised from kind, timestamp and duration, the span's
// annotations, its tags, the "lc" marker of a span with nothing else to
// index, and the remote address row.
func (s *Store) annotationRows(sp *model.Span, dst []annRow) []annRow {
	kind := sp.Kind
	if kind == model.KindUnset {
		kind = inferKind(sp.Annotations)
	}
	ts, dur := max(sp.Timestamp, 0), max(sp.Duration, 0)
	var begin, end, addrKey string
	switch kind {
	case model.KindClient:
		begin, end, addrKey = "cs", "cr", "sa"
	case model.KindServer:
		begin, end, addrKey = "sr", "ss", "ca"
	case model.KindProducer:
		begin, end, addrKey = "ms", "ws", "ma"
	case model.KindConsumer:
		if dur != 0 {
			begin, end = "wr", "mr"
		} else {
			begin = "mr"
		}
		addrKey = "ma"
	default:
		if sp.RemoteEndpoint != nil {
			addrKey = "sa"
		}
	}
	local := s.endpointArgs(sp.LocalEndpoint)
	high := int64(0)
	if s.feat.traceIDHigh {
		high = int64(sp.TraceID.High)
	}
	low, id := int64(sp.TraceID.Low), int64(sp.ID)
	add := func(key string, value any, aType int64, ats int64, ep []any) {
		r := annRow{high: high, low: low, span: id, key: sanitizeVarchar(key), ts: ats}
		args := make([]any, 0, s.w.annCols)
		if s.feat.traceIDHigh {
			args = append(args, high)
		}
		args = append(args, low, id, r.key, value, aType, ats)
		args = append(args, ep...)
		r.args = args
		r.bytes = rowBytes(args)
		r.dep = s.depAnnRow(high, low, id, r.key, aType, ats, ep[len(ep)-1])
		dst = append(dst, r)
	}
	start := len(dst)
	wroteBegin, wroteEnd := false, false
	if begin != "" && ts != 0 {
		add(begin, nil, aTypeAnnotation, ts, local)
		wroteBegin = true
	}
	if end != "" && ts != 0 && dur != 0 {
		add(end, nil, aTypeAnnotation, ts+dur, local)
		wroteEnd = true
	}
	for _, a := range sp.Annotations {
		if wroteBegin && a.Value == begin || wroteEnd && a.Value == end {
			continue
		}
		add(a.Value, nil, aTypeAnnotation, a.Timestamp, local)
	}
	if len(sp.Tags) > 0 {
		for _, k := range sp.SortedTagKeys() {
			add(k, blobValue(sp.Tags[k]), aTypeString, ts, local)
		}
	}
	if len(dst) == start && sp.LocalEndpoint != nil {
		add("lc", "", aTypeString, ts, local)
	}
	if addrKey != "" && sp.RemoteEndpoint != nil && !sp.RemoteEndpoint.IsZero() {
		add(addrKey, "\x01", aTypeBool, ts, s.endpointArgs(sp.RemoteEndpoint))
	}
	return dst
}

// endpointArgs returns the endpoint columns (ipv4, [ipv6], port,
// service_name): all NULL without an endpoint; service_name "" when the
// endpoint has none; the port as Zipkin's signed 16-bit value.
func (s *Store) endpointArgs(e *model.Endpoint) []any {
	n := 3
	if s.feat.ipv6 {
		n = 4
	}
	args := make([]any, 0, n)
	if e == nil {
		for i := 0; i < n; i++ {
			args = append(args, nil)
		}
		return args
	}
	var ipv4 any
	if e.IPv4.IsValid() && e.IPv4.Is4() {
		a := e.IPv4.As4()
		ipv4 = int64(int32(uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])))
	}
	args = append(args, ipv4)
	if s.feat.ipv6 {
		var ipv6 any
		if e.IPv6.IsValid() && e.IPv6.Is6() && !e.IPv6.Is4In6() {
			a := e.IPv6.As16()
			ipv6 = a[:]
		}
		args = append(args, ipv6)
	}
	var port any
	if e.Port > 0 && e.Port <= 65535 {
		port = int64(int16(uint16(e.Port)))
	}
	args = append(args, port, sanitizeVarchar(e.ServiceName))
	return args
}

// sanitizeVarchar makes s fit a VARCHAR(255) utf8mb3 column: invalid UTF-8
// and characters outside the Basic Multilingual Plane (4-byte UTF-8, such as
// emoji) become U+FFFD, and the result is cut to 255 characters.
func sanitizeVarchar(s string) string {
	if len(s) <= maxVarcharChars {
		ascii := true
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				ascii = false
				break
			}
		}
		if ascii {
			return s
		}
	}
	var b strings.Builder
	b.Grow(min(len(s), maxVarcharChars*3))
	n := 0
	for _, r := range s { // invalid bytes arrive as utf8.RuneError
		if n == maxVarcharChars {
			break
		}
		if r > 0xFFFF {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// blobValue returns a tag value for the BLOB a_value column: its exact
// bytes, cut to 65,535 bytes at the start of a UTF-8 sequence.
func blobValue(v string) string {
	if len(v) <= maxBlobBytes {
		return v
	}
	cut := maxBlobBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut]
}
