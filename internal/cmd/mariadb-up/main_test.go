package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

var exportLine = regexp.MustCompile(`^export ([A-Z_]+)='([^']*)'$`)

// TestUpAndStop starts a server the way `eval "$(scripts/mariadb-up)"` does,
// checks both users, and stops it with -stop.
func TestUpAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a private mariadbd")
	}
	if why := mysqltest.MariaDBMissing(); why != "" {
		if mysqltest.MariaDBRequired() {
			t.Fatalf("%s=1: %s", mysqltest.EnvRequireMariaDB, why)
		}
		t.Skip(why)
	}
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"uptest"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("run = %d\n%s", rc, stderr.String())
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		m := exportLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %q is not export NAME='value'", line)
		}
		env[m[1]] = m[2]
	}
	dir := env["MARIADB_UP_DIR"]
	if dir == "" || !strings.Contains(dir, "uptest") {
		t.Fatalf("MARIADB_UP_DIR = %q, want a directory named after uptest", dir)
	}
	t.Cleanup(func() { _ = mysqltest.StopMariaDBDir(dir) })
	if _, err := os.Stat(env["MARIADB_UP_ERROR_LOG"]); err != nil {
		t.Errorf("MARIADB_UP_ERROR_LOG: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, name := range []string{mysqltest.EnvDSN, mysqltest.EnvDSNUnprivileged} {
		db, err := sql.Open("mysql", env[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer db.Close()
		var dbname string
		if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbname); err != nil || dbname != "test" {
			t.Fatalf("%s: DATABASE() = %q, %v", name, dbname, err)
		}
		_, err = db.ExecContext(ctx, "SET GLOBAL read_only = 0")
		var me *mysql.MySQLError
		privileged := name == mysqltest.EnvDSN
		if privileged && err != nil {
			t.Fatalf("%s: SET GLOBAL read_only: %v", name, err)
		}
		if !privileged && (!errors.As(err, &me) || me.Number != 1227) {
			t.Fatalf("%s: SET GLOBAL read_only: %v, want error 1227", name, err)
		}
		db.Close()
	}

	pidBytes, err := os.ReadFile(dir + "/mariadbd.pid")
	if err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if rc := run([]string{"-stop", dir}, &stdout, &stderr); rc != 0 {
		t.Fatalf("run -stop = %d\n%s", rc, stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory after -stop: %v, want it removed", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidBytes)))
	if err != nil {
		t.Fatal(err)
	}
	if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "mariadbd" {
		if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(stat), ") Z") {
			t.Errorf("mariadbd (pid %d) still running after -stop", pid)
		}
	}
}

// TestStopRefusesForeignDir checks that -stop removes only directories that
// mariadb-up made.
func TestStopRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/keep", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"-stop", dir}, &stdout, &stderr); rc == 0 {
		t.Fatal("-stop on a foreign directory succeeded")
	}
	if _, err := os.Stat(dir + "/keep"); err != nil {
		t.Fatalf("-stop removed a foreign directory's file: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	if got, want := shellQuote(`a'b(c)`), `'a'\''b(c)'`; got != want {
		t.Fatalf("shellQuote = %s, want %s", got, want)
	}
}
