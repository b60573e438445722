package mysqlstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// Creating the schema twice leaves each table with exactly Zipkin's indexes, once (Zipkin #2628).
func TestCreateSchemaIdempotent(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		db := openPlain(t, freshDatabase(t, srv.dsn))
		for i := 0; i < 2; i++ {
			if err := mysqlstore.CreateSchema(ctx, db); err != nil {
				t.Fatalf("CreateSchema #%d: %v", i+1, err)
			}
		}
		want := map[string]string{
			"zipkin_spans PRIMARY":                     "trace_id_high,trace_id,id",
			"zipkin_spans trace_id_high":               "trace_id_high,trace_id",
			"zipkin_spans name":                        "name",
			"zipkin_spans remote_service_name":         "remote_service_name",
			"zipkin_spans start_ts":                    "start_ts",
			"zipkin_annotations trace_id_high":         "trace_id_high,trace_id,span_id,a_key,a_timestamp",
			"zipkin_annotations a_key_value":           "a_key,a_value,a_timestamp",
			"zipkin_annotations endpoint_service_name": "endpoint_service_name",
			"zipkin_annotations a_type":                "a_type",
			"zipkin_annotations a_key":                 "a_key,a_timestamp",
			"zipkin_annotations trace_id":              "trace_id,span_id,a_key",
			"zipkin_dependencies PRIMARY":              "day,parent,child",
			// The schema additions (additions.go).
			"zipkin_names PRIMARY":         "kind,service_name,name",
			"zipkin_service_spans PRIMARY": "service_name,start_ts,trace_id_high,trace_id,span_id",
			// The dependency aggregator (deps_aggregate.go).
			"zipkin_dependency_traces PRIMARY": "trace_id",
			"zipkin_dependency_traces day":     "day",
			"zipkin_dependency_queue PRIMARY":  "seq",
			"zipkin_dependency_hours PRIMARY":  "hour,parent,child",
			"zipkin_tags PRIMARY":              "kind,a_key,a_value,start_ts,trace_id_high,trace_id,span_id,service_name",
		}
		rows, err := db.QueryContext(ctx, `SELECT table_name, index_name, column_name FROM information_schema.statistics
			WHERE table_schema = DATABASE() ORDER BY table_name, index_name, seq_in_index`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var tbl, idx, col string
			if err := rows.Scan(&tbl, &idx, &col); err != nil {
				t.Fatal(err)
			}
			k := strings.ToLower(tbl) + " " + idx
			if got[k] != "" {
				got[k] += ","
			}
			got[k] += strings.ToLower(col)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if srv.name == "embedded" {
			// go-mysql-server v0.20 leaves primary keys out of information_schema.statistics
			// for databases other than the one it started with; MariaDB checks them.
			delete(want, "zipkin_spans PRIMARY")
			delete(want, "zipkin_dependencies PRIMARY")
			delete(want, "zipkin_names PRIMARY")
			delete(want, "zipkin_service_spans PRIMARY")
			delete(want, "zipkin_dependency_traces PRIMARY")
			delete(want, "zipkin_dependency_queue PRIMARY")
			delete(want, "zipkin_dependency_hours PRIMARY")
			delete(want, "zipkin_tags PRIMARY")
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("index %s: columns %q, want %q", k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected index %s (%s)", k, got[k])
			}
		}
		s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if f := s.Features(); f != (mysqlstore.Features{TraceIDHigh: true, RemoteServiceName: true, IPv6: true, Dependencies: true, ErrorCount: true}) {
			t.Errorf("Features = %+v, want all", f)
		}
	})
}

// Open on a database without Zipkin's tables says how to create them.
func TestOpenNoSchema(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		db := openPlain(t, freshDatabase(t, srv.dsn))
		_, err := mysqlstore.Open(ctxT(t), db, mysqlstore.Options{Logger: quietLogger})
		if !errors.Is(err, mysqlstore.ErrNoSchema) {
			t.Fatalf("Open = %v, want ErrNoSchema", err)
		}
		if !strings.Contains(err.Error(), "-init-schema") {
			t.Errorf("error %q does not say how to create the schema", err)
		}
	})
}
