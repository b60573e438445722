package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// newStore creates Zipkin's schema in a fresh database of srv and opens a Store on db.
func newStore(t *testing.T, srv server) (*mysqlstore.Store, *sql.DB) {
	t.Helper()
	ctx := ctxT(t)
	db := openPlain(t, freshDatabase(t, srv.dsn))
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, db
}

// dump returns the rows of a query as strings ("v1|v2|…"), NULL as "NULL", []byte as quoted text.
func dump(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				parts[i] = "NULL"
			case []byte:
				parts[i] = fmt.Sprintf("%q", v)
			default:
				parts[i] = fmt.Sprint(v)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func ep(name, ip string, port int) *model.Endpoint {
	e := &model.Endpoint{ServiceName: name, Port: port}
	if ip != "" {
		a := netip.MustParseAddr(ip)
		if a.Is4() {
			e.IPv4 = a
		} else {
			e.IPv6 = a
		}
	}
	return e
}

const (
	selectSpans = `SELECT trace_id_high, trace_id, id, name, remote_service_name, parent_id, debug IS NOT NULL,
		start_ts, duration FROM zipkin_spans ORDER BY trace_id_high, trace_id, id`
	selectAnnotations = `SELECT span_id, a_key, a_value, a_type, a_timestamp, endpoint_ipv4, endpoint_ipv6, endpoint_port,
		endpoint_service_name FROM zipkin_annotations ORDER BY span_id, a_key, a_timestamp`
)

// The v2 → v1 conversion writes the rows Zipkin writes (reference §2): core annotations from the
// kind, the "lc" marker, address rows, endpoint columns and the span row's columns.
func TestAcceptRows(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		s, db := newStore(t, srv)
		local := ep("frontend", "127.0.0.1", 8080)
		remote := ep("backend", "::1", 40000) // a port above 32767 is stored as Zipkin's signed short
		tid := model.TraceID{High: 1, Low: 2}
		spans := []model.Span{
			{TraceID: tid, ID: 1, Kind: model.KindClient, Name: "get", Timestamp: 1000, Duration: 200,
				LocalEndpoint: local, RemoteEndpoint: remote, Debug: true,
				Annotations: []model.Annotation{{Timestamp: 999, Value: "cs"}, {Timestamp: 1100, Value: "foo"}},
				Tags:        map[string]string{"http.path": "/api", "error": ""}},
			{TraceID: tid, ID: 2, ParentID: 1, Kind: model.KindServer, Shared: true, Name: "unknown", Timestamp: 1010,
				Duration: 100, LocalEndpoint: ep("backend", "", 0)},
			{TraceID: tid, ID: 3, Kind: model.KindProducer, Timestamp: 2000, LocalEndpoint: ep("", "10.0.0.1", 0),
				RemoteEndpoint: ep("kafka", "", 0)},
			{TraceID: tid, ID: 4, Kind: model.KindConsumer, Timestamp: 3000, Duration: 5, LocalEndpoint: local},
			{TraceID: tid, ID: 5, Kind: model.KindConsumer, Timestamp: 4000, LocalEndpoint: local},
			{TraceID: tid, ID: 6, Timestamp: 5000, LocalEndpoint: local, RemoteEndpoint: ep("db", "", 3306)},
			{TraceID: tid, ID: 7},
			{TraceID: tid, ID: 8, Timestamp: 6000, Duration: 10, LocalEndpoint: local,
				Annotations: []model.Annotation{{Timestamp: 6000, Value: "sr"}}, RemoteEndpoint: ep("client", "", 0)},
		}
		if err := s.Accept(ctxT(t), spans); err != nil {
			t.Fatalf("Accept: %v", err)
		}
		wantSpans := []string{
			`1|2|1|"get"|"backend"|NULL|1|1000|200`,
			`1|2|2|""|""|1|0|1010|NULL`, // "unknown" → "", shared: no duration
			`1|2|3|""|"kafka"|NULL|0|2000|NULL`,
			`1|2|4|""|""|NULL|0|3000|5`,
			`1|2|5|""|""|NULL|0|4000|NULL`,
			`1|2|6|""|"db"|NULL|0|5000|NULL`,
			`1|2|7|""|""|NULL|0|NULL|NULL`,
			`1|2|8|""|"client"|NULL|0|6000|10`,
		}
		const lo = `2130706433|NULL|8080|"frontend"`
		wantAnns := []string{
			`1|"cr"|NULL|-1|1200|` + lo,
			`1|"cs"|NULL|-1|1000|` + lo, // the span's own "cs" at 999 is replaced by the synthesised one
			`1|"error"|""|6|1000|` + lo,
			`1|"foo"|NULL|-1|1100|` + lo,
			`1|"http.path"|"/api"|6|1000|` + lo,
			`1|"sa"|"\x01"|0|1000|NULL|"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"|-25536|"backend"`,
			`2|"sr"|NULL|-1|1010|NULL|NULL|NULL|"backend"`, // shared spans keep their core annotations
			`2|"ss"|NULL|-1|1110|NULL|NULL|NULL|"backend"`,
			`3|"ma"|"\x01"|0|2000|NULL|NULL|NULL|"kafka"`,
			`3|"ms"|NULL|-1|2000|167772161|NULL|NULL|""`, // no "ws" without a duration; unnamed endpoint → ""
			`4|"mr"|NULL|-1|3005|` + lo,
			`4|"wr"|NULL|-1|3000|` + lo,
			`5|"mr"|NULL|-1|4000|` + lo,                // a consumer without duration has only "mr"
			`6|"lc"|""|6|5000|` + lo,                   // nothing else to index the local service by
			`6|"sa"|"\x01"|0|5000|NULL|NULL|3306|"db"`, // no kind + remote endpoint → "sa"
			// span 7 has no endpoint, annotation or tag: no rows (as in Zipkin)
			`8|"ca"|"\x01"|0|6000|NULL|NULL|NULL|"client"`, // kind inferred from "sr"
			`8|"sr"|NULL|-1|6000|` + lo,
			`8|"ss"|NULL|-1|6010|` + lo,
		}
		checkRows(t, "zipkin_spans", dump(t, db, selectSpans), wantSpans)
		checkRows(t, "zipkin_annotations", dump(t, db, selectAnnotations), wantAnns)
	})
}

func checkRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s rows:\n got:\n  %s\n want:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// A span row that exists is updated as Zipkin updates it: the client's (not shared) timestamp wins,
// names are never replaced by an absent one, parent and duration fill in, debug never changes.
func TestAcceptUpsert(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		s, db := newStore(t, srv)
		ctx := ctxT(t)
		tid := model.TraceID{Low: 9}
		lo := ep("svc", "", 0)
		steps := [][]model.Span{
			// Server half first (shared), then the client half with the same span ID.
			{{TraceID: tid, ID: 1, Kind: model.KindServer, Shared: true, Name: "srv", Timestamp: 2000, Duration: 50, LocalEndpoint: lo}},
			{{TraceID: tid, ID: 1, Kind: model.KindClient, Name: "cli", Timestamp: 1000, Duration: 500, LocalEndpoint: lo,
				RemoteEndpoint: ep("far", "", 0)}},
			// A later shared fragment does not move start_ts.
			{{TraceID: tid, ID: 1, Kind: model.KindServer, Shared: true, Timestamp: 3000, LocalEndpoint: lo}},
			// A fragment without name, timestamp or duration adds the parent and changes nothing else.
			{{TraceID: tid, ID: 1, ParentID: 7, Debug: true, LocalEndpoint: lo}},
			// In one batch: a span without a timestamp, then its timestamped fragment (late duration).
			{{TraceID: tid, ID: 2, Name: "late", LocalEndpoint: lo},
				{TraceID: tid, ID: 2, Name: "unknown", Timestamp: 4000, Duration: 9, LocalEndpoint: lo}},
		}
		for i, b := range steps {
			if err := s.Accept(ctx, b); err != nil {
				t.Fatalf("Accept step %d: %v", i, err)
			}
		}
		checkRows(t, "zipkin_spans", dump(t, db, selectSpans), []string{
			`0|9|1|"cli"|"far"|7|0|1000|500`,
			`0|9|2|"late"|""|NULL|0|4000|9`,
		})
	})
}
