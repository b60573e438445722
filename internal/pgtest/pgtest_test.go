package pgtest

import (
	"context"
	"database/sql"
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestSharedServerAnswersBothDrivers(t *testing.T) {
	s := Shared(t)
	for name, c := range map[string]func() *sql.DB{
		"pgx": func() *sql.DB { return sql.OpenDB(s.PgxConnector(t)) },
		"pq":  func() *sql.DB { return sql.OpenDB(s.PqConnector(t)) },
	} {
		db := c()
		var v string
		if err := db.QueryRowContext(context.Background(), "SHOW server_version").Scan(&v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: server_version %s", name, v)
		db.Close()
	}
}

func TestPrivateServerRestarts(t *testing.T) {
	s := Start(t)
	s.Restart(t)
	db := s.Admin(t)
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}
