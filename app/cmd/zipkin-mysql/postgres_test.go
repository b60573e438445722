package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/pgtest"
)

func TestParseConfigPostgres(t *testing.T) {
	for _, tt := range []struct {
		name          string
		args, env     []string
		from, addr    string
		conns         int
		warnings, pwd string
	}{
		{"STORAGE_TYPE=postgres defaults", nil, []string{"STORAGE_TYPE", "postgres"}, "POSTGRES_*", "localhost:5432/zipkin", defaultMaxConns, "", ""},
		{"POSTGRES_*", nil, []string{"STORAGE_TYPE", "postgresql", "POSTGRES_HOST", "db", "POSTGRES_TCP_PORT", "5433", "POSTGRES_DB", "z",
			"POSTGRES_USER", "u", "POSTGRES_PASS", "p@ss", "POSTGRES_MAX_CONNECTIONS", "20"}, "POSTGRES_*", "db:5433/z", 20, "", "p@ss"},
		{"POSTGRES_DSN over POSTGRES_*", []string{"-storage=postgres"}, []string{"POSTGRES_DSN", "postgres://u:secret@db2:5434/zz?sslmode=disable", "POSTGRES_HOST", "db"},
			"POSTGRES_DSN", "db2:5434/zz", defaultMaxConns, "POSTGRES_HOST ignored: POSTGRES_DSN is set", "secret"},
		{"-postgres-dsn", []string{"-storage=postgres", "-postgres-dsn", "postgres://u@db3/zipkin"}, []string{"MYSQL_HOST", "m"},
			"-postgres-dsn", "db3:5432/zipkin", defaultMaxConns, "MYSQL_HOST ignored: the storage is postgres (-storage)", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, envFunc(tt.env...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Storage != "postgres" || c.PostgresSource != tt.from || c.Addr() != tt.addr || c.MaxConns != tt.conns || c.Password() != tt.pwd {
				t.Errorf("storage %q from %q at %q, %d conns, password %q; want postgres from %q at %q, %d, %q",
					c.Storage, c.PostgresSource, c.Addr(), c.MaxConns, c.Password(), tt.from, tt.addr, tt.conns, tt.pwd)
			}
			if got := strings.Join(c.Warnings, "; "); got != tt.warnings {
				t.Errorf("warnings %q, want %q", got, tt.warnings)
			}
		})
	}
	for _, env := range [][]string{
		{"STORAGE_TYPE", "postgres", "POSTGRES_TCP_PORT", "x"},
		{"STORAGE_TYPE", "postgres", "POSTGRES_MAX_CONNECTIONS", "0"},
		{"STORAGE_TYPE", "postgres", "POSTGRES_DSN", "mysql://nope"},
	} {
		if _, err := parseConfig(nil, envFunc(env...), io.Discard); err == nil {
			t.Errorf("%v: no error", env)
		}
	}
}

// TestPostgresServer runs the command on a private PostgreSQL with
// STORAGE_TYPE=postgres and -init-schema: a posted trace is stored and read
// back, names are served and /health is UP.
func TestPostgresServer(t *testing.T) {
	pg := pgtest.Start(t)
	base, stop := runInProcess(t, envFunc("STORAGE_TYPE", "postgres", "POSTGRES_DSN", pg.DSN()), "-init-schema")
	defer stop()
	now := time.Now().Add(-time.Minute).UnixMicro()
	tid := randHex(16)
	body := fmt.Sprintf(`[{"traceId":%q,"id":"000000000000000a","kind":"SERVER","name":"get /","timestamp":%d,"duration":1000,"localEndpoint":{"serviceName":"pgfront"},"tags":{"http.method":"GET"}},`+
		`{"traceId":%q,"parentId":"000000000000000a","id":"000000000000000b","kind":"CLIENT","name":"query","timestamp":%d,"duration":500,"localEndpoint":{"serviceName":"pgfront"},"remoteEndpoint":{"serviceName":"pgdb"}}]`,
		tid, now, tid, now+100)
	for range 2 { // the second POST is a replay
		resp, err := http.Post(base+"/api/v2/spans", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST spans: HTTP %d", resp.StatusCode)
		}
	}
	waitDrained(t, base, 60*time.Second)
	for path, want := range map[string]string{
		"/api/v2/trace/" + tid:                       `"name":"query"`,
		"/api/v2/services":                           `"pgfront"`,
		"/api/v2/remoteServices?serviceName=pgfront": `"pgdb"`,
		"/api/v2/traces?serviceName=pgfront&annotationQuery=http.method%3DGET":                   tid,
		"/api/v2/dependencies?endTs=" + fmt.Sprint(time.Now().UnixMilli()) + "&lookback=3600000": `"child":"pgdb"`,
		"/health": `UP`,
	} {
		code, b := httpGet(t, base+path)
		if code != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: HTTP %d %s; want 200 with %s", path, code, b, want)
		}
	}
	code, b := httpGet(t, base+"/api/v2/trace/"+tid)
	if n := strings.Count(string(b), `"id":`); code != http.StatusOK || n != 2 {
		t.Errorf("GET trace after a replay: HTTP %d, %d spans, want 2: %s", code, n, b)
	}
}

// TestPostgresRetention: with -retention the PostgreSQL storage deletes a
// trace older than the maximum age, keeps a young one, and exports the
// retention counters and the dependency lag.
func TestPostgresRetention(t *testing.T) {
	pg := pgtest.Start(t)
	base, stop := runInProcess(t, envFunc("STORAGE_TYPE", "postgres", "POSTGRES_DSN", pg.DSN()), "-init-schema",
		"-retention=24h", "-retention-interval=50ms")
	defer stop()
	span := func(tid string, ts int64) string {
		return fmt.Sprintf(`{"traceId":%q,"id":"000000000000000a","kind":"CLIENT","name":"get","timestamp":%d,"duration":1000,"localEndpoint":{"serviceName":"pgfront"},"remoteEndpoint":{"serviceName":"pgdb"}}`, tid, ts)
	}
	oldID, youngID := randHex(16), randHex(16)
	now := time.Now()
	body := "[" + span(oldID, now.Add(-72*time.Hour).UnixMicro()) + "," + span(youngID, now.Add(-time.Minute).UnixMicro()) + "]"
	resp, err := http.Post(base+"/api/v2/spans", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST spans: HTTP %d", resp.StatusCode)
	}
	waitDrained(t, base, 60*time.Second)
	waitFor(t, 60*time.Second, "retention to delete the old span", func() bool {
		return metric(t, base, "zipkin_retention_spans_deleted_total") >= 1
	})
	if code, _ := httpGet(t, base+"/api/v2/trace/"+oldID); code != http.StatusNotFound {
		t.Errorf("GET the old trace: HTTP %d, want 404", code)
	}
	if code, b := httpGet(t, base+"/api/v2/trace/"+youngID); code != http.StatusOK {
		t.Errorf("GET the young trace: HTTP %d %s, want 200", code, b)
	}
	if v := metric(t, base, "zipkin_retention_errors_total"); v != 0 {
		t.Errorf("zipkin_retention_errors_total = %v, want 0", v)
	}
	if v := metric(t, base, "zipkin_dependency_lag_seconds"); v < 0 {
		t.Errorf("zipkin_dependency_lag_seconds = %v, want ≥ 0", v)
	}
}
