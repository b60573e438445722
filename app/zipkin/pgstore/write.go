package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// spanColumns are zipkin_spans' columns in DDL order (COPY and INSERT).
var spanColumns = []string{"trace_id", "trace_id_high", "id", "frag", "parent_id", "kind", "name", "start_ts",
	"duration", "debug", "shared", "l_service", "l_ipv4", "l_ipv6", "l_port", "r_service", "r_ipv4", "r_ipv6",
	"r_port", "annotations", "tags", "terms"}

// maxTerm bounds the bytes of one entry of terms (GIN entries must fit an
// index page); longer terms are searched on annotations and tags alone.
const maxTerm = 1000

// spanRow is one zipkin_spans row.
type spanRow struct {
	low, high, id, frag, parent int64
	kind, name                  string
	ts                          int64 // 0: NULL
	dur                         int64
	debug, shared               bool
	lsvc                        string
	l4, l6                      netip.Addr
	lport                       int32
	rsvc                        string
	r4, r6                      netip.Addr
	rport                       int32
	ann, tags                   []byte // JSON, nil when none
	terms                       []string
	isErr                       bool // an "error" tag (the linker's view; not a column)
}

type rowKey struct{ low, high, id, frag int64 }

type nameRow struct {
	kind          int16
	service, name string
}

// buildRow converts a normalised span to its row; ok is false for a span
// Zipkin rejects (zero trace or span ID, unknown kind).
func buildRow(sp *model.Span) (r spanRow, ok bool) {
	var b rowBuilder
	return b.build(sp)
}

// rowBuilder builds the rows of a batch, reusing its scratch space between
// rows: the rows' JSON and terms are slices of chunks shared by the batch's
// rows (one allocation per chunk, not several per row).
type rowBuilder struct {
	keys  []string
	json  []byte
	tb    termBuilder
	bytes []byte   // chunk of the rows' JSON
	strs  []string // chunk of the rows' terms
}

// build is buildRow with b's scratch space.
func (b *rowBuilder) build(sp *model.Span) (r spanRow, ok bool) {
	if sp.TraceID.IsZero() || sp.ID == 0 || !sp.Kind.Valid() {
		return r, false
	}
	r = spanRow{low: int64(sp.TraceID.Low), high: int64(sp.TraceID.High), id: int64(sp.ID), parent: int64(sp.ParentID),
		kind: string(sp.Kind), name: sp.Name, ts: max(sp.Timestamp, 0), dur: max(sp.Duration, 0), debug: sp.Debug, shared: sp.Shared}
	if e := sp.LocalEndpoint; e != nil {
		r.lsvc, r.l4, r.l6, r.lport = e.ServiceName, e.IPv4, e.IPv6, int32(e.Port)
	}
	if e := sp.RemoteEndpoint; e != nil {
		r.rsvc, r.r4, r.r6, r.rport = e.ServiceName, e.IPv4, e.IPv6, int32(e.Port)
	}
	tb := &b.tb
	tb.buf, tb.ends = tb.buf[:0], tb.ends[:0]
	if len(sp.Annotations) > 0 {
		j := append(b.json[:0], '[')
		for i, x := range sp.Annotations {
			if i > 0 {
				j = append(j, ',')
			}
			j = append(j, '[')
			j = strconv.AppendInt(j, x.Timestamp, 10)
			j = append(j, ',')
			j = appendJSONString(j, x.Value)
			j = append(j, ']')
			tb.add('0', x.Value, "", false)
		}
		b.json = append(j, ']')
		r.ann = b.keep(b.json)
	}
	_, r.isErr = sp.Tags["error"]
	if len(sp.Tags) > 0 {
		keys := b.keys[:0]
		for k := range sp.Tags {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.keys = keys
		j := append(b.json[:0], '{')
		for i, k := range keys {
			v := sp.Tags[k]
			if i > 0 {
				j = append(j, ',')
			}
			j = appendJSONString(j, k)
			j = append(j, ':')
			j = appendJSONString(j, v)
			tb.add('0', k, "", false)
			tb.add('1', k, v, true)
		}
		b.json = append(j, '}')
		r.tags = b.keep(b.json)
		clear(keys) // drop the references to the span's strings
	}
	r.terms = b.terms()
	r.frag = r.hash()
	return r, true
}

// rowChunk bounds the size of the chunks rows' JSON and terms are kept in
// (they start small and double).
const rowChunk = 32 << 10

// keep returns a copy of j in b's current chunk (capacity-limited).
func (b *rowBuilder) keep(j []byte) []byte {
	if cap(b.bytes)-len(b.bytes) < len(j) {
		b.bytes = make([]byte, 0, max(min(rowChunk, 2*cap(b.bytes)), len(j), 256))
	}
	start := len(b.bytes)
	b.bytes = append(b.bytes, j...)
	return b.bytes[start:len(b.bytes):len(b.bytes)]
}

// terms returns the terms of the row being built (sorted, without repeats,
// never nil) in one string, as a slice of b's current chunk.
func (b *rowBuilder) terms() []string {
	n := len(b.tb.ends)
	if n == 0 {
		return []string{}
	}
	if cap(b.strs)-len(b.strs) < n {
		b.strs = make([]string, 0, max(min(rowChunk/16, 2*cap(b.strs)), n, 16))
	}
	start := len(b.strs)
	all := string(b.tb.buf)
	from := 0
	for _, end := range b.tb.ends {
		b.strs = append(b.strs, all[from:end])
		from = end
	}
	out := b.strs[start:len(b.strs):len(b.strs)]
	slices.Sort(out)
	out = slices.Compact(out)
	return out[:len(out):len(out)]
}

func valueTerm(k, v string) string { return "1" + k + "\x1f" + v }

// termBuilder collects a row's terms in one buffer, made into strings with
// one allocation.
type termBuilder struct {
	buf  []byte
	ends []int
}

// add adds the term kind+key, or kind+key+"\x1f"+value with withValue,
// unless it is longer than maxTerm bytes.
func (b *termBuilder) add(kind byte, key, value string, withValue bool) {
	n := 1 + len(key)
	if withValue {
		n += 1 + len(value)
	}
	if n > maxTerm {
		return
	}
	b.buf = append(b.buf, kind)
	b.buf = append(b.buf, key...)
	if withValue {
		b.buf = append(b.buf, 0x1f)
		b.buf = append(b.buf, value...)
	}
	b.ends = append(b.ends, len(b.buf))
}

// hash is the fragment's content hash (FNV-1a 64 over every column), the
// last part of its key: the same fragment sent again has the same key.
func (r *spanRow) hash() int64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	num := func(v int64) {
		for i := 0; i < 8; i++ {
			h = (h ^ uint64(byte(v>>(8*i)))) * prime
		}
	}
	str := func(s string) {
		num(int64(len(s)))
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	byts := func(s []byte) {
		num(int64(len(s)))
		for _, c := range s {
			h = (h ^ uint64(c)) * prime
		}
	}
	addr := func(a netip.Addr) {
		if !a.IsValid() {
			num(-1)
			return
		}
		b := a.As16()
		num(int64(a.BitLen()))
		for _, c := range b {
			h = (h ^ uint64(c)) * prime
		}
	}
	flags := int64(0)
	if r.debug {
		flags |= 1
	}
	if r.shared {
		flags |= 2
	}
	num(r.parent)
	str(r.kind)
	str(r.name)
	num(r.ts)
	num(r.dur)
	num(flags)
	str(r.lsvc)
	addr(r.l4)
	addr(r.l6)
	num(int64(r.lport))
	str(r.rsvc)
	addr(r.r4)
	addr(r.r6)
	num(int64(r.rport))
	byts(r.ann)
	byts(r.tags)
	return int64(h)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

func prefix(a netip.Addr) any {
	if !a.IsValid() {
		return nil
	}
	return netip.PrefixFrom(a, a.BitLen())
}

func addrText(a netip.Addr) any {
	if !a.IsValid() {
		return nil
	}
	return a.String()
}

func nullTs(ts int64) any {
	if ts == 0 {
		return nil
	}
	return ts
}

func nullJSON(b []byte, text bool) any {
	if b == nil {
		return nil
	}
	if text {
		return string(b)
	}
	return b
}

// copyValues are the row's values as pgx's COPY encodes them.
func (r *spanRow) copyValues() []any {
	return []any{r.low, r.high, r.id, r.frag, r.parent, r.kind, r.name, nullTs(r.ts), r.dur, r.debug, r.shared,
		r.lsvc, prefix(r.l4), prefix(r.l6), r.lport, r.rsvc, prefix(r.r4), prefix(r.r6), r.rport,
		nullJSON(r.ann, false), nullJSON(r.tags, false), r.terms}
}

// textValues are the row's values as any driver sends them (insertSQL casts
// them).
func (r *spanRow) textValues(out []any) []any {
	return append(out, r.low, r.high, r.id, r.frag, r.parent, r.kind, r.name, nullTs(r.ts), r.dur, r.debug, r.shared,
		r.lsvc, addrText(r.l4), addrText(r.l6), int64(r.lport), r.rsvc, addrText(r.r4), addrText(r.r6), int64(r.rport),
		nullJSON(r.ann, true), nullJSON(r.tags, true), arrayLiteral(r.terms))
}

// arrayLiteral returns terms as a PostgreSQL text[] literal.
func arrayLiteral(terms []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, t := range terms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, c := range []byte(t) {
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// insertCasts are the casts of insertSQL's parameters, by column.
var insertCasts = []string{"int8", "int8", "int8", "int8", "int8", "text", "text", "int8", "int8", "bool", "bool",
	"text", "text::inet", "text::inet", "int4", "text", "text::inet", "text::inet", "int4", "text::jsonb", "text::jsonb", "text::text[]"}

// insertRowsPerStatement bounds one INSERT (22 parameters a row; PostgreSQL
// takes at most 65,535).
const insertRowsPerStatement = 1000

func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + tableSpans + " (" + strings.Join(spanColumns, ", ") + ") VALUES ")
	p := 1
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j, c := range insertCasts {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(p))
			b.WriteString("::")
			b.WriteString(c)
			p++
		}
		b.WriteByte(')')
	}
	b.WriteString(" ON CONFLICT DO NOTHING")
	return b.String()
}

// Accept stores a batch of normalised spans: invalid spans (zero trace or
// span ID, unknown kind) are skipped and counted (Stats.Rejected), the rest
// written as one unit — with COPY on pgx's connections, falling back, when
// the batch holds a fragment already stored (SQLSTATE 23505, a replay), to a
// staging table and INSERT … ON CONFLICT DO NOTHING; with multi-row INSERT …
// ON CONFLICT DO NOTHING on other drivers. It is idempotent: fragments sent
// again are stored once. Names and autocomplete values not seen before by
// this Store are then upserted into zipkin_names. nil means every valid span
// is durable (as durable as the server's synchronous_commit makes a commit).
func (s *Store) Accept(ctx context.Context, spans []model.Span) error {
	rows := make([]spanRow, 0, len(spans))
	seen := make(map[rowKey]struct{}, len(spans))
	names := make(map[nameRow]struct{})
	var rb rowBuilder
	// Names already stored are left out of the batch's set as it is
	// built (most are, after the first batches).
	s.namesMu.RLock()
	for i := range spans {
		sp := &spans[i]
		r, ok := rb.build(sp)
		if !ok {
			s.stats.rejected.Add(1)
			continue
		}
		k := rowKey{r.low, r.high, r.id, r.frag}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		rows = append(rows, r)
		s.collectNames(names, sp)
	}
	s.namesMu.RUnlock()
	if len(rows) == 0 {
		return nil
	}
	err := s.writeSpans(ctx, rows)
	if err == nil {
		err = s.writeNames(ctx, s.newNames(names))
	}
	if err != nil {
		s.stats.failures.Add(1)
		return err
	}
	s.stats.batches.Add(1)
	s.stats.spans.Add(int64(len(rows)))
	s.maybeDrain(ctx)
	return nil
}

// driver kinds, learned on the first write.
const (
	drvUnknown int32 = iota
	drvPgx
	drvOther
)

var errNotPgx = errors.New("pgstore: not a pgx connection")

func (s *Store) writeSpans(ctx context.Context, rows []spanRow) error {
	if !s.opts.DisableCopy && s.drv.Load() != drvOther {
		err := s.copySpans(ctx, rows)
		if !errors.Is(err, errNotPgx) {
			return err
		}
		s.drv.Store(drvOther)
	}
	return s.insertSpans(ctx, rows)
}

// pgxConn returns the pgx connection under dc (what sql.Conn.Raw passes: the
// pool's connection or the driver's), or nil for another driver. On the
// pool's connections the statements the borrower runs on it are queries
// (pgdialect.UnwrapFor), so that the session stays known.
func pgxConn(dc any, queries ...string) *pgx.Conn {
	if _, ok := pgdialect.UnwrapFor(dc).(*stdlib.Conn); !ok {
		return nil
	}
	return pgdialect.UnwrapFor(dc, queries...).(*stdlib.Conn).Conn()
}

// sqlCopySpans is the COPY statement of a write, as sent and as the pool's
// session tracker is told it; sqlCopyStage the staging path's.
var (
	sqlCopySpans = "COPY " + tableSpans + " (" + strings.Join(spanColumns, ", ") + ") FROM STDIN BINARY"
	sqlCopyStage = "COPY " + tableStage + " (" + strings.Join(spanColumns, ", ") + ") FROM STDIN BINARY"
)

// copySpans writes rows with one COPY on a connection of the pool, and on a
// unique violation again through a staging table.
func (s *Store) copySpans(ctx context.Context, rows []spanRow) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: writing spans: %w", err)
	}
	defer conn.Close()
	src := appendCopyRows(make([]byte, 0, 512*len(rows)), rows)
	queue := newQueueRow(rows)
	return conn.Raw(func(dc any) error {
		pc := pgxConn(dc, "BEGIN", sqlQueue, sqlCopySpans, "COMMIT")
		if pc == nil {
			return errNotPgx
		}
		s.drv.Store(drvPgx)
		var err error
		if s.noDeps {
			_, err = pc.PgConn().CopyFrom(ctx, bytes.NewReader(src), sqlCopySpans)
		} else {
			err = copyInTx(ctx, pc, queue, src)
		}
		if err == nil {
			s.stats.copies.Add(1)
			return nil
		}
		if !isUniqueViolation(err) {
			return fmt.Errorf("pgstore: COPY of %d spans: %w", len(rows), err)
		}
		// The staging statements (a temporary table, INSERT … SELECT) are
		// not among those named: the session is unknown from here, and
		// reset at release.
		pool.Unwrap(dc)
		if err := stageSpans(ctx, pc, queue, src); err != nil {
			return fmt.Errorf("pgstore: COPY of %d spans through a staging table (after a duplicate): %w", len(rows), err)
		}
		s.stats.staged.Add(1)
		return nil
	})
}

// copyInTx writes the queue row and copies src into zipkin_spans in one
// transaction: BEGIN and the queue row in one round trip (a pipeline), the
// COPY, then COMMIT. On an error it rolls back (the connection is then
// outside a transaction, or broken).
func copyInTx(ctx context.Context, pc *pgx.Conn, queue queueRow, src []byte) error {
	pg := pc.PgConn()
	b := &pgconn.Batch{}
	b.ExecParams("BEGIN", nil, nil, nil, nil)
	b.ExecParams(sqlQueue, [][]byte{strconv.AppendInt(nil, queue.created, 10), []byte(queue.traces), queue.spans},
		nil, []int16{0, 0, 1}, nil)
	if _, err := pg.ExecBatch(ctx, b).ReadAll(); err != nil {
		rollback(pg)
		return err
	}
	if _, err := pg.CopyFrom(ctx, bytes.NewReader(src), sqlCopySpans); err != nil {
		rollback(pg)
		return err
	}
	if _, err := pg.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		rollback(pg)
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// rollback ends a failed transaction on pg, when the connection is still
// usable, within a few seconds.
func rollback(pg *pgconn.PgConn) {
	if pg.IsClosed() || pg.TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = pg.Exec(ctx, "ROLLBACK").ReadAll()
}

const (
	tableStage = "zipkin_spans_stage"
	sqlStage   = "CREATE TEMP TABLE " + tableStage + " (LIKE " + tableSpans + ") ON COMMIT DROP"
	sqlUnstage = "INSERT INTO " + tableSpans + " SELECT * FROM " + tableStage + " ON CONFLICT DO NOTHING"
)

// stageSpans copies src into a temporary table dropped at commit and moves
// the rows not yet stored into zipkin_spans, in one transaction.
func stageSpans(ctx context.Context, pc *pgx.Conn, queue queueRow, src []byte) error {
	tx, err := pc.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit: nothing to roll back
	if _, err := tx.Exec(ctx, sqlStage); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sqlQueue, queue.args()...); err != nil {
		return err
	}
	if _, err := pc.PgConn().CopyFrom(ctx, bytes.NewReader(src), sqlCopyStage); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sqlUnstage); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// insertSpans writes rows with multi-row INSERT … ON CONFLICT DO NOTHING, in
// one transaction.
func (s *Store) insertSpans(ctx context.Context, rows []spanRow) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pgstore: writing spans: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: nothing to roll back
	if _, err := tx.ExecContext(ctx, sqlQueue, newQueueRow(rows).args()...); err != nil {
		return fmt.Errorf("pgstore: queueing %d spans for dependency links: %w", len(rows), err)
	}
	args := make([]any, 0, len(spanColumns)*min(len(rows), insertRowsPerStatement))
	for start := 0; start < len(rows); start += insertRowsPerStatement {
		chunk := rows[start:min(start+insertRowsPerStatement, len(rows))]
		args = args[:0]
		for i := range chunk {
			args = chunk[i].textValues(args)
		}
		if _, err := tx.ExecContext(ctx, insertSQL(len(chunk)), args...); err != nil {
			return fmt.Errorf("pgstore: INSERT of %d spans: %w", len(chunk), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("pgstore: committing %d spans: %w", len(rows), err)
	}
	s.stats.inserts.Add(1)
	return nil
}

// collectNames adds sp's zipkin_names rows not known to be stored to set;
// the caller holds s.namesMu for reading.
func (s *Store) collectNames(set map[nameRow]struct{}, sp *model.Span) {
	add := func(n nameRow) {
		if _, ok := s.names[n]; !ok {
			set[n] = struct{}{}
		}
	}
	if svc := sp.LocalServiceName(); svc != "" {
		add(nameRow{nameService, svc, ""})
		if sp.Name != "" {
			add(nameRow{nameSpan, svc, sp.Name})
		}
		if r := sp.RemoteServiceName(); r != "" {
			add(nameRow{nameRemote, svc, r})
		}
	}
	if len(s.keys) > 0 {
		for k, v := range sp.Tags {
			if s.keys[k] && v != "" {
				add(nameRow{nameValue, k, v})
			}
		}
	}
}

// newNames returns the rows of set not yet known to be stored.
func (s *Store) newNames(set map[nameRow]struct{}) []nameRow {
	s.namesMu.RLock()
	defer s.namesMu.RUnlock()
	var out []nameRow
	for n := range set {
		if _, ok := s.names[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// writeNames upserts names (sorted, so that concurrent batches take their
// locks in one order) and then remembers them.
func (s *Store) writeNames(ctx context.Context, names []nameRow) error {
	if len(names) == 0 {
		return nil
	}
	slices.SortFunc(names, func(a, b nameRow) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		if c := strings.Compare(a.service, b.service); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	names = slices.Compact(names)
	for start := 0; start < len(names); start += 1000 {
		chunk := names[start:min(start+1000, len(names))]
		var b strings.Builder
		b.WriteString("INSERT INTO " + tableNames + " (kind, service, name) VALUES ")
		args := make([]any, 0, 3*len(chunk))
		for i, n := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "($%d::int2, $%d::text, $%d::text)", 3*i+1, 3*i+2, 3*i+3)
			args = append(args, int64(n.kind), n.service, n.name)
		}
		b.WriteString(" ON CONFLICT DO NOTHING")
		if _, err := s.db.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("pgstore: writing %d names: %w", len(chunk), err)
		}
	}
	s.namesMu.Lock()
	for _, n := range names {
		s.names[n] = struct{}{}
	}
	s.namesMu.Unlock()
	return nil
}
