// Command mariadb-up starts a private MariaDB for tests, benchmarks and the
// commands in the docs, the way the tests' mysqltest.StartMariaDB does: a
// fresh directory under $TMPDIR, a free port on 127.0.0.1, database test, a
// privileged user sqlpool/sqlpool (ALL PRIVILEGES ON *.*) and an
// unprivileged one sqlpool_ro/sqlpool_ro (data privileges on test.* only).
//
// It prints shell commands to stdout and exits, leaving the server running
// in a session of its own:
//
//	eval "$(scripts/mariadb-up [name])"
//	go test ./...                              # MYSQL_TEST_DSN and MYSQL_TEST_DSN_UNPRIVILEGED are set
//	scripts/mariadb-up -stop "$MARIADB_UP_DIR" # stop it and remove its directory
//
// The printed lines export MYSQL_TEST_DSN, MYSQL_TEST_DSN_UNPRIVILEGED,
// MARIADB_UP_DIR (the server's directory) and MARIADB_UP_ERROR_LOG (its
// error log). The optional name becomes part of the directory's name.
//
// Flags:
//
//	-stop DIR   stop the server whose directory is DIR and remove DIR
//	            (DIR defaults to $MARIADB_UP_DIR); nothing else is done
//	-cpus LIST  run mariadbd under taskset -c LIST (default: no pinning)
//	-opt OPTION an extra mariadbd option, e.g. -opt --max-connections=500
//	            (repeatable; default none)
//
// It needs mariadbd and mariadb-install-db (Debian: mariadb-server).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type optList []string

func (o *optList) String() string     { return strings.Join(*o, " ") }
func (o *optList) Set(v string) error { *o = append(*o, v); return nil }

// run is main without the process exit: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mariadb-up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stop := fs.Bool("stop", false, "stop the server whose directory is the argument (default $MARIADB_UP_DIR) and remove the directory")
	cpus := fs.String("cpus", "", "run mariadbd under taskset -c `LIST`")
	var opts optList
	fs.Var(&opts, "opt", "an extra mariadbd `OPTION` (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: eval \"$(mariadb-up [-cpus LIST] [-opt OPTION]... [name])\"\n       mariadb-up -stop [DIR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	if *stop {
		dir := fs.Arg(0)
		if dir == "" {
			dir = os.Getenv("MARIADB_UP_DIR")
		}
		if dir == "" {
			fmt.Fprintln(stderr, "mariadb-up: -stop needs a directory or $MARIADB_UP_DIR")
			return 2
		}
		if err := mysqltest.StopMariaDBDir(dir); err != nil {
			fmt.Fprintln(stderr, "mariadb-up:", err)
			return 1
		}
		fmt.Fprintf(stderr, "mariadb-up: stopped the server in %s\n", dir)
		return 0
	}
	start := time.Now()
	m, err := mysqltest.StartMariaDBServer(mysqltest.MariaDBOptions{
		Name: fs.Arg(0), Args: opts, CPUs: *cpus, Detach: true,
	})
	if err != nil {
		fmt.Fprintln(stderr, "mariadb-up:", err)
		return 1
	}
	fmt.Fprintf(stdout, "export %s=%s\n", mysqltest.EnvDSN, shellQuote(m.DSN()))
	fmt.Fprintf(stdout, "export %s=%s\n", mysqltest.EnvDSNUnprivileged, shellQuote(m.UnprivilegedDSN()))
	fmt.Fprintf(stdout, "export MARIADB_UP_DIR=%s\n", shellQuote(m.Dir()))
	fmt.Fprintf(stdout, "export MARIADB_UP_ERROR_LOG=%s\n", shellQuote(m.ErrorLogPath()))
	fmt.Fprintf(stdout, "# stop it: scripts/mariadb-up -stop %s\n", shellQuote(m.Dir()))
	fmt.Fprintf(stderr, "mariadb-up: mariadbd (pid %d) ready on %s in %.1fs, files in %s\n"+
		"mariadb-up: stop it with: scripts/mariadb-up -stop  (after eval; or -stop %s)\n",
		m.PID(), m.Addr(), time.Since(start).Seconds(), m.Dir(), shellQuote(m.Dir()))
	return 0
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
