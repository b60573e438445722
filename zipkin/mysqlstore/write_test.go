package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/zipkin/model"
	"github.com/sqlpool/sqlpool/zipkin/mysqlstore"
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

func TestAcceptSmoke(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		s, db := newStore(t, srv)
		sp := model.Span{
			TraceID: model.TraceID{High: 1, Low: 2}, ID: 3, ParentID: 4, Kind: model.KindClient, Name: "get",
			Timestamp: 1000, Duration: 200, LocalEndpoint: ep("frontend", "192.168.1.1", 8080),
			RemoteEndpoint: ep("backend", "::1", 9000),
			Annotations:    []model.Annotation{{Timestamp: 1100, Value: "foo"}},
			Tags:           map[string]string{"http.path": "/api"},
		}
		if err := s.Accept(ctxT(t), []model.Span{sp}); err != nil {
			t.Fatalf("Accept: %v", err)
		}
		t.Log(dump(t, db, "SELECT * FROM zipkin_spans"))
		t.Log(dump(t, db, "SELECT * FROM zipkin_annotations ORDER BY a_key"))
	})
}
