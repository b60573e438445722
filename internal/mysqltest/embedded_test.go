package mysqltest

import (
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
)

// The embedded server runs as a child process built from the application
// module; these tests check the helper that starts it.

func TestEmbeddedDSNShape(t *testing.T) {
	dsn := EmbeddedDSN(t)
	if !strings.HasPrefix(dsn, "root@tcp(127.0.0.1:") || !strings.HasSuffix(dsn, ")/test") {
		t.Fatalf("EmbeddedDSN = %q", dsn)
	}
	if again := EmbeddedDSN(t); again != dsn {
		t.Fatalf("EmbeddedDSN changed: %q then %q", dsn, again)
	}
	if !IsMariaDB() && DSN(t) != dsn {
		t.Fatalf("DSN = %q without %s, want the embedded %q", DSN(t), EnvDSN, dsn)
	}
}

func TestNewEmbeddedIsPrivate(t *testing.T) {
	db := openDB(t, NewEmbedded(t))
	if _, err := db.Exec("CREATE TABLE private_t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'test' AND table_name = 'private_t'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("private table count = %d, %v", n, err)
	}
	shared := openDB(t, EmbeddedDSN(t))
	if err := shared.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'test' AND table_name = 'private_t'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("shared server sees the private table: %d, %v", n, err)
	}
}
