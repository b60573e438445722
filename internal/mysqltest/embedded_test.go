package mysqltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestEmbeddedBinaryIsPerProcessLink checks that each process runs its own
// hard link of the one executable per repository root, named by its pid.
func TestEmbeddedBinaryIsPerProcessLink(t *testing.T) {
	bin, err := embeddedBinary()
	if err != nil {
		t.Skip(err)
	}
	if want := "embedded-mysql." + strconv.Itoa(os.Getpid()); filepath.Base(bin) != want {
		t.Fatalf("executable %s, want one named %s", bin, want)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := os.Stat(filepath.Join(filepath.Dir(bin), "embedded-mysql"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi, shared) {
		t.Fatal("the per-process executable is not a hard link of the shared one")
	}
}

// TestRemoveStaleLinks checks that only the links of processes that have
// exited are removed.
func TestRemoveStaleLinks(t *testing.T) {
	dir := t.TempDir()
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Skip(err)
	}
	mine := "embedded-mysql." + strconv.Itoa(os.Getpid())
	dead := "embedded-mysql." + strconv.Itoa(exited.Process.Pid)
	for _, name := range []string{mine, dead, "embedded-mysql", "lock", "embedded-mysql.x"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleLinks(dir)
	for _, name := range []string{mine, "embedded-mysql", "lock", "embedded-mysql.x"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v, want it kept", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, dead)); !os.IsNotExist(err) {
		t.Errorf("%s (an exited process): %v, want it removed", dead, err)
	}
}
