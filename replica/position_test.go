package replica_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/replica"
)

func TestMariaDBPositions(t *testing.T) {
	parse := func(s string) replica.Position {
		t.Helper()
		p, err := replica.MariaDB.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		a, b   string
		covers bool
	}{
		{"0-1-10", "0-1-10", true},
		{"0-1-10", "0-1-9", true},
		{"0-1-9", "0-1-10", false},
		{"0-1-10", "", true},
		{"", "0-1-1", false},
		{"", "", true},
		{"0-1-10,1-2-5", "1-2-5", true},
		{"0-1-10,1-2-5", "0-1-10,1-2-6", false},
		{"0-2-11", "0-1-10", true}, // another server id in the domain: the sequence decides
		{"1-2-5", "0-1-1", false},  // a domain the replica has never seen
	} {
		if got := parse(c.a).Covers(parse(c.b)); got != c.covers {
			t.Errorf("%q covers %q = %v, want %v", c.a, c.b, got, c.covers)
		}
	}
	m := parse("0-1-10,2-3-4").Merge(parse("0-1-12,1-1-1"))
	if got := m.String(); got != "0-1-12,1-1-1,2-3-4" {
		t.Errorf("merge = %q", got)
	}
	for _, bad := range []string{"x", "0-1", "0-1-a", "0-1-2,", "-1-1-1"} {
		if _, err := replica.MariaDB.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestPostgreSQLPositions(t *testing.T) {
	a, err := replica.PostgreSQL.Parse("16/B374D848")
	if err != nil {
		t.Fatal(err)
	}
	b, err := replica.PostgreSQL.Parse("16/B374D849")
	if err != nil {
		t.Fatal(err)
	}
	if a.Covers(b) || !b.Covers(a) || a.Merge(b).String() != "16/B374D849" {
		t.Errorf("LSN order wrong: %v %v", a, b)
	}
	if _, err := replica.PostgreSQL.Parse("16-B3"); err == nil {
		t.Error("accepted a bad LSN")
	}
}

func TestTokenText(t *testing.T) {
	r, err := replica.New(replica.Config{Primary: nopConnector{}, Flavor: replica.MariaDB})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tok, err := r.ParseToken("mariadb:0-1-7")
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.String(); got != "mariadb:0-1-7" {
		t.Errorf("String = %q", got)
	}
	for _, bad := range []string{"postgresql:0/1", "0-1-7", "mariadb:zz"} {
		if _, err := r.ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
	if _, err := replica.New(replica.Config{Flavor: replica.MariaDB}); err == nil {
		t.Error("New without a primary succeeded")
	}
}

func TestCollector(t *testing.T) {
	r, err := replica.New(replica.Config{Primary: nopConnector{}, Flavor: replica.MariaDB, Name: "app",
		Replicas: []replica.Replica{{Name: "db2", Connector: nopConnector{}}}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(r.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 10 {
		t.Errorf("%d families, want 10", len(mfs))
	}
}

func TestWritesClassifier(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1":                              false,
		"  select * from t":                     false,
		"/* x */ SELECT 1":                      false,
		"-- c\nSHOW TABLES":                     false,
		"(SELECT 1) UNION (SELECT 2)":           false,
		"INSERT INTO t VALUES (1) RETURNING id": true,
		"WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x": true,
		"UPDATE t SET a = 1 RETURNING a":                        true,
		"CALL p()":                                              true,
	} {
		if got := replica.WritesForTest(q); got != want {
			t.Errorf("writes(%q) = %v, want %v", q, got, want)
		}
	}
}
