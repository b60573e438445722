package mysqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvRequireGalera, when set to "1", turns the skip of StartGalera (Galera, rsync or root
// missing) into a test failure. CI sets it.
const EnvRequireGalera = "SQLPOOL_REQUIRE_GALERA"

// GaleraNodes is the number of nodes StartGalera starts.
const GaleraNodes = 3

// galeraPorts is how many ports above the base port scripts/galera uses (SQL base+1..3,
// group communication +11..13, IST +21..23, SST +31..33).
const galeraPorts = 34

// Galera is a 3-node MariaDB Galera cluster on 127.0.0.1 started by StartGalera, driven by
// scripts/galera (the one source of truth for how nodes are started; see its header for the
// failure-detection settings). Nodes are numbered 1 to 3, as in the script.
type Galera struct {
	tb     testing.TB
	script string
	dir    string
	base   int

	mu sync.Mutex // one script command at a time
}

// StartGalera starts a 3-node Galera cluster for the test in a fresh directory with free
// ports, waits until all nodes are Synced, and stops it (removing the directory) in
// tb.Cleanup. Without root, mariadbd, the Galera provider (galera-4) or rsync it skips the
// test with the reason, or fails it when SQLPOOL_REQUIRE_GALERA=1. Start-up takes ~12–20 s.
func StartGalera(tb testing.TB) *Galera {
	tb.Helper()
	script, err := galeraScript()
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	if why := galeraMissing(); why != "" {
		galeraSkipOrFail(tb, "Galera test cluster unavailable: %s", why)
		return nil
	}
	var lastOut string
	for attempt := 0; attempt < 3; attempt++ {
		dir, err := os.MkdirTemp("", "sqlpool-galera-")
		if err != nil {
			tb.Fatalf("mysqltest: %v", err)
		}
		// The nodes run as the mysql user, which must reach the directory.
		if err := os.Chmod(dir, 0o755); err != nil {
			tb.Fatalf("mysqltest: %v", err)
		}
		g := &Galera{tb: tb, script: script, dir: dir, base: galeraBasePort()}
		out, err := g.run(4*time.Minute, "up")
		if err == nil {
			tb.Cleanup(g.down)
			tb.Logf("mysqltest: Galera cluster up in %s, SQL ports %d-%d", dir, g.base+1, g.base+GaleraNodes)
			return g
		}
		lastOut = out
		g.down()
		if !strings.Contains(out, "Address already in use") && !strings.Contains(out, "not Synced") {
			break
		}
	}
	tb.Fatalf("mysqltest: scripts/galera up failed:\n%s", lastOut)
	return nil
}

func galeraSkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv(EnvRequireGalera) == "1" {
		tb.Fatalf(EnvRequireGalera+"=1: "+format, args...)
	}
	tb.Skipf(format+" (CI installs it: .ci/run)", args...)
}

// galeraMissing returns why the cluster cannot run here, or "".
func galeraMissing() string {
	var missing []string
	if lookPath("mariadbd") == "" || lookPath("mariadb-install-db") == "" {
		missing = append(missing, "mariadb-server")
	}
	provider := os.Getenv("GALERA_PROVIDER")
	if provider == "" {
		provider = "/usr/lib/galera/libgalera_smm.so"
	}
	if _, err := os.Stat(provider); err != nil {
		missing = append(missing, "galera-4")
	}
	if lookPath("rsync") == "" {
		missing = append(missing, "rsync")
	}
	if len(missing) > 0 {
		return "not installed: " + strings.Join(missing, ", ") +
			" (apt-get install -y --no-install-recommends mariadb-server mariadb-client galera-4 rsync)"
	}
	if os.Geteuid() != 0 {
		return "scripts/galera must run as root (it runs the nodes as the mysql user)"
	}
	return ""
}

// galeraScript finds scripts/galera at the module root, from this source file's location or,
// failing that, from the working directory upwards.
func galeraScript() (string, error) {
	var roots []string
	if _, file, _, ok := runtime.Caller(0); ok {
		roots = append(roots, filepath.Join(filepath.Dir(file), "..", ".."))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			roots = append(roots, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
			continue
		}
		s := filepath.Join(r, "scripts", "galera")
		if _, err := os.Stat(s); err == nil {
			return s, nil
		}
	}
	return "", errors.New("cannot find scripts/galera at the module root")
}

// galeraBasePort returns a base port whose whole range is free on 127.0.0.1 right now and
// lies outside the kernel's ephemeral range. A port inside that range can be taken at any
// moment as the local end of an outgoing connection (another test's client, or a node's own
// link to a peer); a joiner whose SST or IST port is taken that way aborts ("SST request
// callback failed. This is unrecoverable, restart required.") on every restart while that
// connection lives.
func galeraBasePort() int {
	lo, hi := ephemeralPorts()
	from, to := galeraPortWindow(lo, hi)
	for {
		base := from + rand.IntN((to-from)/100+1)*100
		free := true
		for i := 1; i < galeraPorts && free; i++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				free = false
				continue
			}
			ln.Close()
		}
		if free {
			return base
		}
	}
}

// ephemeralPorts returns the kernel's range of local ports for outgoing connections
// (/proc/sys/net/ipv4/ip_local_port_range), or Linux's default 32768–60999 when it cannot
// be read.
func ephemeralPorts() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}

// galeraPortWindow returns the lowest and highest base port, a multiple of 100, whose ports
// base+1 to base+galeraPorts-1 all lie outside the ephemeral range [lo, hi]: from 20000 (or
// 10000 when the range starts lower) up to just below lo when there are at least ten such
// bases, else just above hi up to 65500. It returns 20000, 20000 when neither side has room
// (a kernel configured to use nearly every port for outgoing connections).
func galeraPortWindow(lo, hi int) (from, to int) {
	below := (lo - galeraPorts) / 100 * 100 // highest base with base+galeraPorts-1 < lo
	for _, start := range []int{20000, 10000} {
		if below >= start+9*100 {
			return start, below
		}
	}
	above := (hi + 99) / 100 * 100 // lowest base with base+1 > hi
	if top := (65535 - galeraPorts) / 100 * 100; above+9*100 <= top {
		return above, top
	}
	return 20000, 20000
}

func (g *Galera) run(timeout time.Duration, args ...string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args = append(args, g.dir)
	cmd := exec.CommandContext(ctx, g.script, args...)
	cmd.Env = append(os.Environ(), "GALERA_BASE_PORT="+strconv.Itoa(g.base))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("scripts/galera %s: timed out after %v", strings.Join(args, " "), timeout)
	}
	return string(out), err
}

func (g *Galera) down() {
	if out, err := g.run(2*time.Minute, "down"); err != nil {
		g.tb.Logf("mysqltest: scripts/galera down: %v\n%s", err, out)
	}
	_ = os.RemoveAll(g.dir)
}

func (g *Galera) checkNode(n int) {
	if n < 1 || n > GaleraNodes {
		g.tb.Fatalf("mysqltest: Galera node %d: nodes are numbered 1 to %d", n, GaleraNodes)
	}
}

// Addr returns node n's SQL address (127.0.0.1:port).
func (g *Galera) Addr(n int) string {
	g.checkNode(n)
	return "127.0.0.1:" + strconv.Itoa(g.base+n)
}

// DSN returns node n's DSN for the privileged user, database test.
func (g *Galera) DSN(n int) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = MariaDBUser, MariaDBPassword
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", g.Addr(n), "test"
	cfg.Timeout = 5 * time.Second
	return cfg.FormatDSN()
}

// DSNs returns the three nodes' DSNs, node 1 first.
func (g *Galera) DSNs() []string {
	out := make([]string, GaleraNodes)
	for i := range out {
		out[i] = g.DSN(i + 1)
	}
	return out
}

// Kill sends SIGKILL to node n and returns when it is gone.
func (g *Galera) Kill(n int) {
	g.tb.Helper()
	g.checkNode(n)
	if out, err := g.run(time.Minute, "kill", strconv.Itoa(n)); err != nil {
		g.tb.Fatalf("mysqltest: scripts/galera kill %d: %v\n%s", n, err, out)
	}
}

// Start starts node n again and returns when it is Synced (it rejoins by state transfer;
// ~8 s). Node n must be able to reach a primary component: after two nodes were killed,
// start the one killed last first.
func (g *Galera) Start(n int) {
	g.tb.Helper()
	if err := g.TryStart(n); err != nil {
		g.tb.Fatal(err)
	}
}

// TryStart is Start for use from another goroutine than the test's: it returns the error
// instead of failing the test.
func (g *Galera) TryStart(n int) error {
	g.checkNode(n)
	out, err := g.run(4*time.Minute, "start", strconv.Itoa(n))
	if err != nil && strings.Contains(out, "restart required") {
		// Galera aborted the join and asks for a restart (an SST request that failed while
		// the peers were still forming their component): do what it says, once.
		out, err = g.run(4*time.Minute, "start", strconv.Itoa(n))
	}
	if err != nil {
		return fmt.Errorf("mysqltest: scripts/galera start %d: %v\n%s", n, err, out)
	}
	return nil
}

// Freeze sends SIGSTOP to node n's mariadbd: the process stops answering while its kernel
// still accepts connections and acknowledges data, as a frozen VM's peers see it only through
// missing answers. Thaw resumes it.
func (g *Galera) Freeze(n int) { g.signal(n, syscall.SIGSTOP) }

// Thaw sends SIGCONT to node n's mariadbd (see Freeze).
func (g *Galera) Thaw(n int) { g.signal(n, syscall.SIGCONT) }

func (g *Galera) signal(n int, sig syscall.Signal) {
	g.tb.Helper()
	g.checkNode(n)
	b, err := os.ReadFile(filepath.Join(g.dir, "node"+strconv.Itoa(n), "pid"))
	if err != nil {
		g.tb.Fatalf("mysqltest: Galera node %d: reading its pid file: %v", n, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		g.tb.Fatalf("mysqltest: Galera node %d: pid file: %v", n, err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		g.tb.Fatalf("mysqltest: Galera node %d: %v: %v", n, sig, err)
	}
}

// NodeStatus is what a node says of itself and the cluster.
type NodeStatus struct {
	ClusterStatus string // wsrep_cluster_status: Primary, non-Primary, Disconnected
	ClusterSize   int    // wsrep_cluster_size
	LocalState    string // wsrep_local_state_comment: Synced, Donor/Desynced, Joining, …
}

// Status asks node n over TCP (its own connection, not pooled) for its wsrep status.
func (g *Galera) Status(ctx context.Context, n int) (NodeStatus, error) {
	g.checkNode(n)
	cfg, err := mysql.ParseDSN(g.DSN(n))
	if err != nil {
		return NodeStatus{}, err
	}
	cfg.Timeout = time.Second
	cfg.Logger = QuietLogger{} // a down node is expected here
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return NodeStatus{}, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW STATUS WHERE Variable_name IN ('wsrep_cluster_status','wsrep_cluster_size','wsrep_local_state_comment')")
	if err != nil {
		return NodeStatus{}, err
	}
	defer rows.Close()
	var st NodeStatus
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return NodeStatus{}, err
		}
		switch k {
		case "wsrep_cluster_status":
			st.ClusterStatus = v
		case "wsrep_cluster_size":
			st.ClusterSize, _ = strconv.Atoi(v)
		case "wsrep_local_state_comment":
			st.LocalState = v
		}
	}
	return st, rows.Err()
}

// WaitApplied returns once every node has applied every write the cluster committed before
// the call. Galera applies a transaction on the other nodes after COMMIT has returned on the
// node that ran it, so a plain read on another node can miss a write that was just
// acknowledged, for as long as that node lags (milliseconds, or seconds on a loaded machine);
// reads are causal only with wsrep_sync_wait (docs/cluster.md). WaitApplied makes such a
// causal read on each node in turn, on a connection of its own (wsrep_sync_wait=1: the node
// first learns the cluster's current position and waits until it has applied up to it).
// It waits for writes to be applied, and never makes missing data appear: a write that no
// node has, or that one node skipped, is still missing afterwards. Every node must be up and
// Synced; the wait is bounded by ctx and by the nodes' own causal-read timeout (30 s by
// default), after which the read fails with 1205.
func (g *Galera) WaitApplied(ctx context.Context) error {
	for n := 1; n <= GaleraNodes; n++ {
		db, err := sql.Open("mysql", g.DSN(n)+"&wsrep_sync_wait=1")
		if err != nil {
			return err
		}
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		db.Close()
		if err != nil {
			return fmt.Errorf("mysqltest: Galera node %d: causal read (wsrep_sync_wait=1): %w", n, err)
		}
	}
	return nil
}

// Dir returns the cluster's directory (node n's error log is Dir()/node<n>/error.log).
func (g *Galera) Dir() string { return g.dir }
