package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// The generator is deterministic and has the cardinalities its doc comment
// states.
func TestBulkGenShape(t *testing.T) {
	g := bulkGen{Begin: 0, End: 86_400_000_000, Traces: 5000, Seed: 7}
	var spans []model.Span
	for i := 0; i < g.Traces; i++ {
		spans = g.trace(i, spans)
	}
	again := g.trace(42, nil)
	first := 0
	for i := 0; i < 42; i++ {
		first += len(g.trace(i, nil))
	}
	a, _ := json.Marshal(again)
	b, _ := json.Marshal(spans[first : first+len(again)])
	if string(a) != string(b) {
		t.Fatal("trace 42 differs between two generations")
	}
	services, names, remotes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	errTraces := map[model.TraceID]bool{}
	ids := map[[3]uint64]bool{}
	var lastTS int64
	for _, sp := range spans {
		k := [3]uint64{sp.TraceID.High, sp.TraceID.Low, uint64(sp.ID)}
		if ids[k] {
			t.Fatalf("span %v twice", k)
		}
		ids[k] = true
		services[sp.LocalEndpoint.ServiceName] = true
		names[sp.Name] = true
		if r := sp.RemoteServiceName(); r != "" {
			remotes[r] = true
		}
		if _, ok := sp.Tags["error"]; ok {
			errTraces[sp.TraceID] = true
		}
		if sp.ParentID == 0 {
			if sp.Timestamp < lastTS {
				t.Fatalf("root at %d after one at %d: traces not in time order", sp.Timestamp, lastTS)
			}
			lastTS = sp.Timestamp
			if got := int64(sp.TraceID.High >> 32); got != sp.Timestamp/1_000_000 {
				t.Fatalf("trace ID high bits %d, want the epoch second %d", got, sp.Timestamp/1_000_000)
			}
		}
	}
	perTrace := float64(len(spans)) / float64(g.Traces)
	if len(services) != NumServices || len(names) < 150 || len(remotes) != NumServices+3 || perTrace < 5 || perTrace > 15 {
		t.Errorf("%d services, %d span names, %d remote services, %.1f spans per trace", len(services), len(names), len(remotes), perTrace)
	}
	if rate := float64(len(errTraces)) / float64(g.Traces); rate < 0.01 || rate > 0.03 {
		t.Errorf("%.3f of traces with an error tag, want about 0.02", rate)
	}
}

// A bulk load, with LOAD DATA and with INSERTs, leaves every table as
// ingest (Store.Accept) leaves it for the same spans.
func TestBulkLoadStoresWhatAcceptStores(t *testing.T) {
	if !mysqltest.IsMariaDB() {
		mysqltest.RequireMariaDB(t, "LOAD DATA LOCAL INFILE needs MariaDB")
		return
	}
	// The benchmark's server autocompletes these keys; the loader writes
	// their values into zipkin_tags as Accept does.
	t.Setenv("AUTOCOMPLETE_KEYS", "http.method,db.system")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := bulkGen{Begin: time.Now().Add(-time.Hour).UnixMicro(), End: time.Now().UnixMicro(), Traces: 300, Seed: 3}
	fresh := func() *sql.DB {
		cfg, err := mysql.ParseDSN(mysqltest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("bulk_%d", time.Now().UnixNano())
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if a, err := sql.Open("mysql", cfg.FormatDSN()); err == nil {
				_, _ = a.Exec("DROP DATABASE " + name)
				a.Close()
			}
		})
		cfg.DBName = name
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := mysqlstore.CreateSchema(ctx, db); err != nil {
			t.Fatal(err)
		}
		return db
	}
	viaAccept := fresh()
	st, err := mysqlstore.Open(ctx, viaAccept, mysqlstore.Options{AutocompleteKeys: []string{"http.method", "db.system"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < g.Traces; i++ {
		if err := st.Accept(ctx, g.trace(i, nil)); err != nil {
			t.Fatal(err)
		}
	}
	want := dumpTables(ctx, t, viaAccept)
	for _, insert := range []bool{false, true} {
		db := fresh()
		indexesBefore := dumpIndexes(ctx, t, db)
		res, err := bulkLoad(ctx, db, g, 70, insert, !insert, nil)
		if err != nil {
			t.Fatalf("bulkLoad(insert=%v): %v", insert, err)
		}
		if wantMethod := map[bool]string{false: "LOAD DATA LOCAL INFILE", true: "INSERT"}[insert]; res.Method != wantMethod {
			t.Errorf("method %q, want %q", res.Method, wantMethod)
		}
		if got := dumpIndexes(ctx, t, db); got != indexesBefore {
			t.Errorf("indexes after the bulk load:\n%s\nbefore:\n%s", got, indexesBefore)
		}
		got := dumpTables(ctx, t, db)
		for table, w := range want {
			if got[table] != w {
				t.Errorf("%s after a bulk load (%s) differs from Accept's:\n got %.2000s\nwant %.2000s", table, res.Method, got[table], w)
			}
		}
		if res.Rows["zipkin_service_spans"] == 0 || res.Rows["zipkin_annotations"] == 0 {
			t.Errorf("rows written: %v", res.Rows)
		}
	}
}

// dumpTables returns every row of the Zipkin tables and the additions,
// sorted, as text.
func dumpTables(ctx context.Context, t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range []string{"zipkin_spans", "zipkin_annotations", "zipkin_names", "zipkin_service_spans", "zipkin_tags"} {
		rows, err := db.QueryContext(ctx, "SELECT * FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				if v == nil {
					parts[i] = "NULL"
				} else {
					parts[i] = fmt.Sprintf("%q", v)
				}
			}
			lines = append(lines, strings.Join(parts, ","))
		}
		rows.Close()
		sort.Strings(lines)
		out[table] = fmt.Sprintf("%d rows\n%s", len(lines), strings.Join(lines, "\n"))
	}
	return out
}

// dumpIndexes lists the indexes of the database's tables.
func dumpIndexes(ctx context.Context, t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(ctx, `SELECT table_name, index_name, non_unique, seq_in_index, column_name, COALESCE(sub_part, 0)
		FROM information_schema.statistics WHERE table_schema = DATABASE() ORDER BY 1, 2, 4`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var tbl, idx, col string
		var nonUnique, seq, sub int
		if err := rows.Scan(&tbl, &idx, &nonUnique, &seq, &col, &sub); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s unique=%v %d %s %d\n", tbl, idx, nonUnique == 0, seq, col, sub)
	}
	return b.String()
}
