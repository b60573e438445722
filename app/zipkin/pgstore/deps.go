package pgstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// Dependency aggregation: GetDependencies reads per-hour link counts instead
// of linking every trace of the window on each request.
//
// Every write adds, in its own transaction, one row to
// zipkin_dependency_queue naming the traces it wrote (the low 64 bits of
// their IDs: a trace is all fragments with those bits, as in
// zipkin/mysqlstore) with the linker's view of each row (appendView). A
// drain (DrainDependencies; Accept runs one when
// Options.DependencyDrainInterval has passed since the last, and
// RunDependencyAggregation on a timer) takes the oldest queue rows, one
// transaction per drainRows of them, holding a transaction advisory lock
// (depLockKey) so that drains (and retention) run one at a time: it deletes
// the rows, links each trace they name with Zipkin's DependencyLinker rules
// (mysqlstore.LinkTraces) — from the rows' views when the trace has no
// record in zipkin_dependency_traces (it was never drained, so they hold all
// its fragments stored so far), else from its stored fragments read back —
// and adds the difference from what the record counted (its hour and links)
// to zipkin_dependency_hours. A trace counts in the hour of its earliest
// span timestamp (mysqlstore.TraceHour, WindowHours).
//
// The queue is the durable cursor: a queue row commits with the spans it
// names, so every stored fragment has its trace relinked after it commits;
// relinking is idempotent (a replay or a trace relinked twice changes
// nothing), and a restart resumes with the rows left. GetDependencies is
// exact at every moment: in one REPEATABLE READ snapshot it adds to the
// hour counts the differences of the traces still queued, computed as the
// drain would.
const (
	tableDepQueue  = "zipkin_dependency_queue"
	tableDepTraces = "zipkin_dependency_traces"
	tableDepHours  = "zipkin_dependency_hours"

	ddlDepQueue = `CREATE TABLE IF NOT EXISTS ` + tableDepQueue + ` (
  seq BIGSERIAL PRIMARY KEY,
  created BIGINT NOT NULL,
  traces BIGINT[] NOT NULL,
  spans BYTEA NOT NULL
)`
	// The linker's views are written once and read once: stored out of line
	// without compression (pglz would cost CPU on every write).
	ddlDepQueueStorage = `ALTER TABLE ` + tableDepQueue + ` ALTER COLUMN spans SET STORAGE EXTERNAL`
	ddlDepTraces       = `CREATE TABLE IF NOT EXISTS ` + tableDepTraces + ` (
  trace_id BIGINT PRIMARY KEY,
  hour BIGINT,
  links TEXT NOT NULL
)`
	ddlDepTracesHour = `CREATE INDEX IF NOT EXISTS zipkin_dependency_traces_hour ON ` + tableDepTraces + ` (hour)`
	ddlDepHours      = `CREATE TABLE IF NOT EXISTS ` + tableDepHours + ` (
  hour BIGINT NOT NULL,
  parent TEXT NOT NULL,
  child TEXT NOT NULL,
  call_count BIGINT NOT NULL,
  error_count BIGINT NOT NULL,
  PRIMARY KEY (hour, parent, child)
)`

	// drainRows bounds the queue rows (write batches) one drain transaction
	// takes.
	drainRows = 64
	// inlineDrains bounds the drain transactions one Accept runs.
	inlineDrains = 8
	// DefaultDependencyDrainInterval is Options.DependencyDrainInterval's
	// default.
	DefaultDependencyDrainInterval = 3 * time.Second

	hourMicros = int64(3_600_000_000)

	// Drains and retention take a transaction-level advisory lock keyed by
	// zipkin_dependency_traces' OID (in the high half "zipk"), so that they run
	// one at a time per schema. A table lock would do the same but also
	// conflict with autovacuum's, which PostgreSQL cancels on such conflicts:
	// drains every few seconds could keep the table from being vacuumed.
	depLockKey      = "(2053729387::int8 << 32) | '" + tableDepTraces + "'::regclass::oid::int8"
	sqlLockDeps     = "SELECT pg_advisory_xact_lock(" + depLockKey + ")"
	sqlTryLockDeps  = "SELECT pg_try_advisory_xact_lock(" + depLockKey + ")"
	sqlTakeQueue    = "DELETE FROM " + tableDepQueue + " WHERE seq IN (SELECT seq FROM " + tableDepQueue + " ORDER BY seq LIMIT $1) RETURNING spans"
	sqlPendingQueue = "SELECT spans FROM " + tableDepQueue
	sqlQueue        = "INSERT INTO " + tableDepQueue + " (created, traces, spans) VALUES ($1::int8, $2::text::int8[], $3::bytea)"
	// The traces are looked up one by one along the primary key (LATERAL,
	// kept from being flattened by OFFSET 0): given thousands of IDs,
	// "trace_id = ANY($1)" makes the planner scan the whole table.
	sqlLinkerSpans = "SELECT s.* FROM unnest($1::int8[]) AS q(t), LATERAL (SELECT trace_id, trace_id_high, id, parent_id, kind, shared, l_service, l_ipv4::text, l_ipv6::text, l_port, r_service, start_ts, tags ? 'error' FROM " +
		tableSpans + " WHERE trace_id = q.t OFFSET 0) s"
	sqlRecords    = "SELECT r.* FROM unnest($1::int8[]) AS q(t), LATERAL (SELECT trace_id, hour, links FROM " + tableDepTraces + " WHERE trace_id = q.t OFFSET 0) r"
	sqlAddHours   = "INSERT INTO " + tableDepHours + " AS h (hour, parent, child, call_count, error_count) SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::int8[], $5::int8[]) ON CONFLICT (hour, parent, child) DO UPDATE SET call_count = h.call_count + EXCLUDED.call_count, error_count = h.error_count + EXCLUDED.error_count"
	sqlZeroHours  = "DELETE FROM " + tableDepHours + " WHERE hour = ANY($1::int8[]) AND call_count <= 0"
	sqlNewRecords = "INSERT INTO " + tableDepTraces + " (trace_id, hour, links) SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[])"
	sqlPutRecords = "INSERT INTO " + tableDepTraces + " AS r (trace_id, hour, links) SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[]) ON CONFLICT (trace_id) DO UPDATE SET hour = EXCLUDED.hour, links = EXCLUDED.links"
	sqlDelRecords = "DELETE FROM " + tableDepTraces + " WHERE trace_id = ANY($1::int8[])"
	sqlHourLinks  = "SELECT parent, child, sum(call_count)::int8, sum(error_count)::int8 FROM " + tableDepHours + " WHERE hour BETWEEN $1 AND $2 GROUP BY 1, 2"
	sqlLag        = "SELECT min(created) FROM " + tableDepQueue
)

// queueRow is a write's zipkin_dependency_queue row: when it was made
// (epoch µs), the traces written (an int8[] literal of the low 64 bits of
// their IDs) and the linker's view of every row written (appendView).
type queueRow struct {
	created int64
	traces  string
	spans   []byte
}

func newQueueRow(rows []spanRow) queueRow {
	q := queueRow{created: time.Now().UnixMicro(), traces: int8Array(traceLows(rows))}
	q.spans = make([]byte, 0, 64*len(rows))
	for i := range rows {
		q.spans = appendView(q.spans, &rows[i])
	}
	return q
}

// args are sqlQueue's parameters.
func (q queueRow) args() []any { return []any{q.created, q.traces, q.spans} }

// appendView appends what the linker reads of a row: trace ID, span and
// parent IDs, kind, shared, local endpoint, remote service, timestamp and
// whether it has an "error" tag.
func appendView(b []byte, r *spanRow) []byte {
	flags := byte(0)
	if r.shared {
		flags |= 1
	}
	if r.isErr {
		flags |= 2
	}
	b = append(b, flags)
	for _, v := range [...]int64{r.low, r.high, r.id, r.parent, r.ts, int64(r.lport)} {
		b = binary.AppendVarint(b, v)
	}
	for _, str := range [...]string{r.kind, r.lsvc, r.rsvc} {
		b = binary.AppendUvarint(b, uint64(len(str)))
		b = append(b, str...)
	}
	for _, a := range [...]netip.Addr{r.l4, r.l6} {
		if !a.IsValid() {
			b = append(b, 0)
			continue
		}
		ab := a.AsSlice()
		b = append(b, byte(len(ab)))
		b = append(b, ab...)
	}
	return b
}

var errView = errors.New("pgstore: " + tableDepQueue + " holds a row this version cannot read")

// viewDecoder decodes queue rows' views: the strings it reads (kinds and
// service names, which repeat) are made once each, and endpoints are kept
// in slabs.
type viewDecoder struct {
	strs map[string]string
	eps  []model.Endpoint
}

func (d *viewDecoder) str(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	if d.strs == nil {
		d.strs = map[string]string{}
	}
	s := string(b)
	d.strs[s] = s
	return s
}

// endpoint is linkerEndpoint, from d's slab.
func (d *viewDecoder) endpoint(svc string, v4, v6 netip.Addr, port int64) *model.Endpoint {
	e := model.Endpoint{ServiceName: svc, IPv4: v4, IPv6: v6, Port: int(port)}
	if e.IsZero() {
		return nil
	}
	if len(d.eps) == cap(d.eps) {
		d.eps = make([]model.Endpoint, 0, 256)
	}
	d.eps = append(d.eps, e)
	return &d.eps[len(d.eps)-1]
}

// decodeViews adds the spans of views to byTrace, by the low 64 bits of
// their trace IDs.
func (d *viewDecoder) decodeViews(b []byte, byTrace map[int64][]model.Span) error {
	varint := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	str := func() string {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			b = nil
			return ""
		}
		v := d.str(b[n : n+int(l)])
		b = b[n+int(l):]
		return v
	}
	addr := func() netip.Addr {
		if len(b) == 0 || len(b) < 1+int(b[0]) {
			b = nil
			return netip.Addr{}
		}
		n := int(b[0])
		a, _ := netip.AddrFromSlice(b[1 : 1+n])
		b = b[1+n:]
		return a
	}
	for len(b) > 0 {
		flags := b[0]
		b = b[1:]
		low, high, id, parent, ts, port := varint(), varint(), varint(), varint(), varint(), varint()
		kind, lsvc, rsvc := str(), str(), str()
		l4, l6 := addr(), addr()
		if b == nil {
			return errView
		}
		sp := model.Span{TraceID: model.TraceID{High: uint64(high), Low: uint64(low)}, ID: model.ID(uint64(id)),
			ParentID: model.ID(uint64(parent)), Kind: model.Kind(kind), Shared: flags&1 != 0, Timestamp: ts,
			RemoteEndpoint: d.endpoint(rsvc, netip.Addr{}, netip.Addr{}, 0)}
		sp.LocalEndpoint = d.endpoint(lsvc, l4, l6, port)
		if flags&2 != 0 {
			sp.Tags = map[string]string{"error": ""}
		}
		byTrace[low] = append(byTrace[low], sp)
	}
	return nil
}

// int8Array is an int8[] literal.
func int8Array(v []int64) string {
	b := make([]byte, 0, 2+20*len(v))
	b = append(b, '{')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, x, 10)
	}
	return string(append(b, '}'))
}

// traceLows returns the distinct low 64 bits of the rows' trace IDs.
func traceLows(rows []spanRow) []int64 {
	out := make([]int64, 0, len(rows)/4+1)
	seen := make(map[int64]struct{}, len(rows)/4+1)
	for i := range rows {
		if _, ok := seen[rows[i].low]; !ok {
			seen[rows[i].low] = struct{}{}
			out = append(out, rows[i].low)
		}
	}
	slices.Sort(out)
	return out
}

// querier is what relink reads through: a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// hourLink is a link in an hour.
type hourLink struct {
	hour          int64
	parent, child string
}

// record is what a trace counted: its hour and links (hasHour false: it
// counts nowhere).
type record struct {
	hour    int64
	hasHour bool
	stored  bool // the trace has fragments (relink's new records)
	links   []model.DependencyLink
}

// relinked is the result of relinking traces: per trace its new record, and
// the differences to add per hour.
type relinked struct {
	now   map[int64]record
	old   map[int64]record
	delta map[hourLink]*[2]int64
}

// relink computes what the drain writes for the traces lows. views holds
// the linker's view of their fragments from the queue rows at hand. A trace
// without a record was never drained, so every fragment of it stored so far
// is in queue rows: in views when they are all the pending ones (a read), or
// the rest in rows a later drain takes, which then finds the record. Those
// traces are linked from views; the others (relinked after their record was
// made) from their stored fragments, read back.
func relink(ctx context.Context, q querier, lows []int64, views map[int64][]model.Span) (*relinked, error) {
	arr := int8Array(lows)
	r := &relinked{now: make(map[int64]record, len(lows)), old: make(map[int64]record), delta: map[hourLink]*[2]int64{}}
	rows, err := q.QueryContext(ctx, sqlRecords, arr)
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading the dependency records of %d traces: %w", len(lows), err)
	}
	for rows.Next() {
		var low int64
		var hour sql.NullInt64
		var links string
		if err := rows.Scan(&low, &hour, &links); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: reading the dependency records of %d traces: %w", len(lows), err)
		}
		ls, err := decodeLinks(links)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: the dependency record of trace %016x: %w", uint64(low), err)
		}
		r.old[low] = record{hour: hour.Int64, hasHour: hour.Valid, links: ls}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading the dependency records of %d traces: %w", len(lows), err)
	}
	traces := make(map[int64][]model.Span, len(lows))
	var readBack []int64
	for _, low := range lows {
		if _, ok := r.old[low]; ok {
			readBack = append(readBack, low)
		} else {
			traces[low] = views[low]
		}
	}
	if len(readBack) > 0 {
		if err := readLinkerSpans(ctx, q, readBack, traces); err != nil {
			return nil, err
		}
	}
	add := func(hour int64, links []model.DependencyLink, sign int64) {
		for _, l := range links {
			k := hourLink{hour, l.Parent, l.Child}
			d := r.delta[k]
			if d == nil {
				d = new([2]int64)
				r.delta[k] = d
			}
			d[0] += sign * l.CallCount
			d[1] += sign * l.ErrorCount
		}
	}
	for _, low := range lows {
		var now record
		if spans := traces[low]; len(spans) > 0 {
			now.stored = true
			if h, ok := mysqlstore.TraceHour(spans); ok {
				now.hour, now.hasHour, now.links = h, true, mysqlstore.LinkTraces([][]model.Span{spans})
			}
		}
		r.now[low] = now
		if old, ok := r.old[low]; ok && old.hasHour {
			add(old.hour, old.links, -1)
		}
		if now.hasHour {
			add(now.hour, now.links, 1)
		}
	}
	for k, d := range r.delta {
		if d[0] == 0 && d[1] == 0 {
			delete(r.delta, k)
		}
	}
	return r, nil
}

// readLinkerSpans reads the linker's columns of the stored fragments of the
// traces lows into traces.
func readLinkerSpans(ctx context.Context, q querier, lows []int64, traces map[int64][]model.Span) error {
	rows, err := q.QueryContext(ctx, sqlLinkerSpans, int8Array(lows))
	if err != nil {
		return fmt.Errorf("pgstore: reading the spans of %d traces to link: %w", len(lows), err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			low, high, id, parent, lport int64
			kind, lsvc, rsvc             string
			shared                       bool
			l4, l6                       sql.NullString
			ts                           sql.NullInt64
			isErr                        sql.NullBool
		)
		if err := rows.Scan(&low, &high, &id, &parent, &kind, &shared, &lsvc, &l4, &l6, &lport, &rsvc, &ts, &isErr); err != nil {
			return fmt.Errorf("pgstore: reading the spans of %d traces to link: %w", len(lows), err)
		}
		sp := model.Span{TraceID: model.TraceID{High: uint64(high), Low: uint64(low)}, ID: model.ID(uint64(id)),
			ParentID: model.ID(uint64(parent)), Kind: model.Kind(kind), Shared: shared, Timestamp: ts.Int64,
			LocalEndpoint:  linkerEndpoint(lsvc, inetAddr(l4, "/32"), inetAddr(l6, "/128"), lport),
			RemoteEndpoint: linkerEndpoint(rsvc, netip.Addr{}, netip.Addr{}, 0)}
		if isErr.Bool {
			sp.Tags = map[string]string{"error": ""}
		}
		traces[low] = append(traces[low], sp)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: reading the spans of %d traces to link: %w", len(lows), err)
	}
	return nil
}

func inetAddr(s sql.NullString, mask string) netip.Addr {
	if !s.Valid {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(strings.TrimSuffix(s.String, mask))
	return a
}

// linkerEndpoint is the endpoint the linker and Trace.merge compare (no
// IPs for a remote one: only its service name is read).
func linkerEndpoint(svc string, v4, v6 netip.Addr, port int64) *model.Endpoint {
	e := &model.Endpoint{ServiceName: svc, IPv4: v4, IPv6: v6, Port: int(port)}
	if e.IsZero() {
		return nil
	}
	return e
}

// encodeLinks and decodeLinks are a record's links as stored: a JSON array
// of [parent, child, calls, errors].
func encodeLinks(links []model.DependencyLink) string {
	b := make([]byte, 0, 2+40*len(links))
	b = append(b, '[')
	for i, l := range links {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendJSONString(b, l.Parent)
		b = append(b, ',')
		b = appendJSONString(b, l.Child)
		b = append(b, ',')
		b = strconv.AppendInt(b, l.CallCount, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, l.ErrorCount, 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

func decodeLinks(s string) ([]model.DependencyLink, error) {
	var raw [][4]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, err
	}
	out := make([]model.DependencyLink, len(raw))
	for i, x := range raw {
		if err := errors.Join(json.Unmarshal(x[0], &out[i].Parent), json.Unmarshal(x[1], &out[i].Child),
			json.Unmarshal(x[2], &out[i].CallCount), json.Unmarshal(x[3], &out[i].ErrorCount)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errDrainBusy is drainOnce's answer when another drain holds the lock and
// it was asked not to wait.
var errDrainBusy = errors.New("pgstore: another dependency drain is running")

// DrainDependencies counts every write queued so far into
// zipkin_dependency_hours, in transactions of at most 64 writes each, and
// returns how many writes it drained. It waits for a drain running
// elsewhere (another Store or process on the same tables) to finish first.
// GetDependencies answers the same before and after: draining only moves
// work off the read path. Tests call it to reach a drained state; the
// server runs RunDependencyAggregation.
func (s *Store) DrainDependencies(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.drainOnce(ctx, true)
		total += n
		if err != nil || n < s.drainBatch() {
			return total, err
		}
	}
}

// RunDependencyAggregation drains the queue every interval (zero or
// negative: DefaultDependencyDrainInterval) until ctx ends, and returns
// ctx's error. A failed drain is retried at the next tick.
func (s *Store) RunDependencyAggregation(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultDependencyDrainInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		_, _ = s.DrainDependencies(ctx)
	}
}

// DependencyLag returns the age of the oldest write not yet drained (0
// when the queue is empty): how far zipkin_dependency_hours is behind the
// spans. GetDependencies counts those writes already.
func (s *Store) DependencyLag(ctx context.Context) (time.Duration, error) {
	var created sql.NullInt64
	if err := s.db.QueryRowContext(ctx, sqlLag).Scan(&created); err != nil {
		return 0, fmt.Errorf("pgstore: reading the dependency queue: %w", err)
	}
	if !created.Valid {
		return 0, nil
	}
	return max(time.Since(time.UnixMicro(created.Int64)), 0), nil
}

// maybeDrain runs up to inlineDrains drain transactions when the drain
// interval has passed since the last drain this Store started, unless a
// drain is running (here or elsewhere). Errors are left to the next drain.
func (s *Store) maybeDrain(ctx context.Context) {
	iv := s.opts.DependencyDrainInterval
	if iv < 0 {
		return
	}
	if iv == 0 {
		iv = DefaultDependencyDrainInterval
	}
	now := time.Now().UnixNano()
	last := s.lastDrain.Load()
	if now-last < int64(iv) || !s.lastDrain.CompareAndSwap(last, now) {
		return
	}
	for range inlineDrains {
		if n, err := s.drainOnce(ctx, false); err != nil || n < s.drainBatch() {
			return
		}
	}
}

// drainBatch is how many queue rows one drain transaction takes: drainRows,
// or fewer in tests (SetDrainRows).
func (s *Store) drainBatch() int { return cmp.Or(s.drainLimit, drainRows) }

// drainOnce drains up to drainBatch queue rows in one transaction and
// returns how many it took; with !wait it returns 0, errDrainBusy when
// another drain holds the lock.
func (s *Store) drainOnce(ctx context.Context, wait bool) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("pgstore: dependency drain: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: nothing to roll back
	if wait {
		if _, err := tx.ExecContext(ctx, sqlLockDeps); err != nil {
			return 0, fmt.Errorf("pgstore: dependency drain: %w", err)
		}
	} else {
		var got bool
		if err := tx.QueryRowContext(ctx, sqlTryLockDeps).Scan(&got); err != nil {
			return 0, fmt.Errorf("pgstore: dependency drain: %w", err)
		}
		if !got {
			return 0, errDrainBusy
		}
	}
	rows, err := tx.QueryContext(ctx, sqlTakeQueue, s.drainBatch())
	if err != nil {
		return 0, fmt.Errorf("pgstore: dependency drain: taking queued writes: %w", err)
	}
	n := 0
	views := map[int64][]model.Span{}
	var vd viewDecoder
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pgstore: dependency drain: taking queued writes: %w", err)
		}
		n++
		if err := vd.decodeViews(b, views); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pgstore: dependency drain: %w", err)
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("pgstore: dependency drain: taking queued writes: %w", err)
	}
	if n == 0 {
		return 0, tx.Commit()
	}
	lows := traceKeys(views)
	r, err := relink(ctx, tx, lows, views)
	if err != nil {
		return 0, fmt.Errorf("pgstore: dependency drain: %w", err)
	}
	if err := r.write(ctx, tx); err != nil {
		return 0, fmt.Errorf("pgstore: dependency drain: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("pgstore: dependency drain: commit: %w", err)
	}
	s.stats.drained.Add(int64(n))
	return n, nil
}

// write applies r: the hour differences and the new records.
func (r *relinked) write(ctx context.Context, tx *sql.Tx) error {
	if len(r.delta) > 0 {
		keys := make([]hourLink, 0, len(r.delta))
		for k := range r.delta {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b hourLink) int {
			return cmp.Or(cmp.Compare(a.hour, b.hour), strings.Compare(a.parent, b.parent), strings.Compare(a.child, b.child))
		})
		hours, calls, errs := make([]int64, len(keys)), make([]int64, len(keys)), make([]int64, len(keys))
		parents, children := make([]string, len(keys)), make([]string, len(keys))
		negative := false
		var touched []int64
		for i, k := range keys {
			d := r.delta[k]
			hours[i], parents[i], children[i], calls[i], errs[i] = k.hour, k.parent, k.child, d[0], d[1]
			if d[0] < 0 {
				negative = true
				touched = append(touched, k.hour)
			}
		}
		if _, err := tx.ExecContext(ctx, sqlAddHours, int8Array(hours), arrayLiteral(parents), arrayLiteral(children),
			int8Array(calls), int8Array(errs)); err != nil {
			return fmt.Errorf("adding to %s: %w", tableDepHours, err)
		}
		if negative {
			if _, err := tx.ExecContext(ctx, sqlZeroHours, int8Array(touched)); err != nil {
				return fmt.Errorf("deleting emptied rows of %s: %w", tableDepHours, err)
			}
		}
	}
	// Every trace relinked keeps a record (hour NULL: it counts nowhere), so
	// that a trace without one was never drained; one whose fragments are
	// all gone (retention) loses it.
	// Records of traces that had none are inserted (drains run one at a
	// time under the lock, and only they add records, so none can have
	// appeared since relink read them): an upsert's arbiter check costs
	// more, and most traces are new.
	type records struct {
		lows  []int64
		links []string
		hours []byte
	}
	var put [2]records // [0] new, [1] had a record
	var delLows []int64
	for low, now := range r.now {
		_, had := r.old[low]
		switch {
		case now.stored:
			p := &put[0]
			if had {
				p = &put[1]
			}
			if len(p.lows) == 0 {
				p.hours = append(p.hours, '{')
			} else {
				p.hours = append(p.hours, ',')
			}
			if now.hasHour {
				p.hours = strconv.AppendInt(p.hours, now.hour, 10)
			} else {
				p.hours = append(p.hours, "NULL"...)
			}
			p.lows = append(p.lows, low)
			p.links = append(p.links, encodeLinks(now.links))
		case had:
			delLows = append(delLows, low)
		}
	}
	for i, q := range [2]string{sqlNewRecords, sqlPutRecords} {
		if p := &put[i]; len(p.lows) > 0 {
			if _, err := tx.ExecContext(ctx, q, int8Array(p.lows), string(append(p.hours, '}')), arrayLiteral(p.links)); err != nil {
				return fmt.Errorf("writing %s: %w", tableDepTraces, err)
			}
		}
	}
	if len(delLows) > 0 {
		if _, err := tx.ExecContext(ctx, sqlDelRecords, int8Array(delLows)); err != nil {
			return fmt.Errorf("deleting from %s: %w", tableDepTraces, err)
		}
	}
	return nil
}

// GetDependencies returns the service graph of the window [endTs-lookback,
// endTs] (epoch milliseconds) with Zipkin's DependencyLinker rules, each
// parent→child pair once with its counts summed, sorted by parent and
// child. A trace (all fragments whose trace IDs share their low 64 bits)
// counts in the hour of its earliest span timestamp, and the window is
// taken in whole hours (mysqlstore.WindowHours): from the hour of
// endTs-lookback to the hour before endTs when endTs is on an hour
// boundary, else the hour of endTs. It reads zipkin_dependency_hours and,
// in the same snapshot, relinks the traces whose writes are not drained
// yet, so the answer is exact right after a write.
func (s *Store) GetDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	if endTs <= 0 {
		return nil, &model.QueryError{Msg: "endTs <= 0"}
	}
	if lookback <= 0 {
		return nil, &model.QueryError{Msg: "lookback <= 0"}
	}
	h0, h1 := mysqlstore.WindowHours(endTs, lookback)
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("pgstore: select dependencies: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	sums := map[[2]string]*[2]int64{}
	addLink := func(p, c string, calls, errs int64) {
		v := sums[[2]string{p, c}]
		if v == nil {
			v = new([2]int64)
			sums[[2]string{p, c}] = v
		}
		v[0] += calls
		v[1] += errs
	}
	rows, err := tx.QueryContext(ctx, sqlHourLinks, h0, h1)
	if err != nil {
		return nil, fmt.Errorf("pgstore: select dependencies: %w", err)
	}
	for rows.Next() {
		var p, c string
		var calls, errs int64
		if err := rows.Scan(&p, &c, &calls, &errs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: select dependencies: %w", err)
		}
		addLink(p, c, calls, errs)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("pgstore: select dependencies: %w", err)
	}
	views, err := pendingViews(ctx, tx)
	if err != nil {
		return nil, err
	}
	if lows := traceKeys(views); len(lows) > 0 {
		r, err := relink(ctx, tx, lows, views)
		if err != nil {
			return nil, err
		}
		for k, d := range r.delta {
			if k.hour >= h0 && k.hour <= h1 {
				addLink(k.parent, k.child, d[0], d[1])
			}
		}
	}
	out := make([]model.DependencyLink, 0, len(sums))
	for k, v := range sums {
		if v[0] > 0 {
			out = append(out, model.DependencyLink{Parent: k[0], Child: k[1], CallCount: v[0], ErrorCount: v[1]})
		}
	}
	slices.SortFunc(out, func(a, b model.DependencyLink) int {
		return cmp.Or(strings.Compare(a.Parent, b.Parent), strings.Compare(a.Child, b.Child))
	})
	return out, nil
}

// pendingViews returns the linker's views of the writes not drained yet,
// by trace.
func pendingViews(ctx context.Context, q querier) (map[int64][]model.Span, error) {
	rows, err := q.QueryContext(ctx, sqlPendingQueue)
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading the dependency queue: %w", err)
	}
	defer rows.Close()
	views := map[int64][]model.Span{}
	var vd viewDecoder
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("pgstore: reading the dependency queue: %w", err)
		}
		if err := vd.decodeViews(b, views); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: reading the dependency queue: %w", err)
	}
	return views, nil
}

// traceKeys returns the keys of views, sorted.
func traceKeys(views map[int64][]model.Span) []int64 {
	out := make([]int64, 0, len(views))
	for k := range views {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
