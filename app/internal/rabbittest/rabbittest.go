// Package rabbittest starts a private RabbitMQ broker for tests: Debian's
// rabbitmq-server (package rabbitmq-server) run as a child process on
// 127.0.0.1, on free ports, with its own epmd, node name, database and logs
// in a temporary directory, and no plugins.
//
// Start-up takes about 4–5 s on a 2-core machine (Broker.StartupTime has
// the figure of each start). Tests that need a broker skip when
// rabbitmq-server is not installed, and fail instead when
// SQLPOOL_REQUIRE_RABBITMQ=1.
package rabbittest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Server is the broker's start script. Debian's /usr/sbin/rabbitmq-server
// switches to the rabbitmq user and logs to /var/log; this one runs as the
// caller with the environment given.
const Server = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// RequireEnv is the variable that turns a missing rabbitmq-server into a
// test failure.
const RequireEnv = "SQLPOOL_REQUIRE_RABBITMQ"

// Broker is a running private broker.
type Broker struct {
	// URL is the AMQP URI of the broker, as user guest (which RabbitMQ
	// admits only from localhost).
	URL string
	// Port is the AMQP port on 127.0.0.1.
	Port int
	// StartupTime is how long the broker took from exec to accepting an
	// AMQP connection.
	StartupTime time.Duration
	// Dir holds the broker's database and logs.
	Dir string

	cmd, epmd *exec.Cmd
	out       *bytes.Buffer
	exited    chan struct{}
	stopOnce  sync.Once
}

// Available reports whether rabbitmq-server is installed.
func Available() bool {
	_, err := os.Stat(Server)
	return err == nil
}

// Start starts a broker and stops it in tb.Cleanup. It skips the test when
// rabbitmq-server is not installed (fails under SQLPOOL_REQUIRE_RABBITMQ=1).
func Start(tb testing.TB) *Broker {
	tb.Helper()
	if !Available() {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("rabbittest: %s not found and %s=1 (apt-get install rabbitmq-server)", Server, RequireEnv)
		}
		tb.Skipf("rabbittest: %s not found (apt-get install rabbitmq-server; %s=1 makes this a failure)", Server, RequireEnv)
	}
	dir, err := os.MkdirTemp("", "rabbittest")
	if err != nil {
		tb.Fatal(err)
	}
	b, err := start(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := b.Stop(); err != nil {
			tb.Errorf("rabbittest: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	tb.Logf("rabbittest: broker on 127.0.0.1:%d started in %v", b.Port, b.StartupTime.Round(time.Millisecond))
	return b
}

// freePorts returns n distinct free TCP ports of 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func start(dir string) (*Broker, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, fmt.Errorf("rabbittest: %w", err)
	}
	amqpPort, distPort, epmdPort := ports[0], ports[1], ports[2]
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		return nil, err
	}
	node := "rabbittest" + strconv.Itoa(os.Getpid()) + "_" + strconv.Itoa(amqpPort) + "@localhost"
	env := append(os.Environ(),
		"HOME="+dir, // the Erlang cookie is written here
		"RABBITMQ_NODENAME="+node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(amqpPort),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT="+strconv.Itoa(epmdPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"), // absent: the defaults
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"),
	)
	b := &Broker{Port: amqpPort, Dir: dir, out: &bytes.Buffer{}, exited: make(chan struct{}),
		URL: "amqp://guest:guest@127.0.0.1:" + strconv.Itoa(amqpPort) + "/"}

	// An epmd of our own, in the foreground, so that it ends with the test.
	epmd, err := exec.LookPath("epmd")
	if err != nil {
		return nil, fmt.Errorf("rabbittest: epmd not found: %w", err)
	}
	b.epmd = exec.Command(epmd, "-address", "127.0.0.1", "-port", strconv.Itoa(epmdPort))
	b.epmd.Env = env
	b.epmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := b.epmd.Start(); err != nil {
		return nil, fmt.Errorf("rabbittest: start epmd: %w", err)
	}
	if err := waitTCP(epmdPort, 10*time.Second); err != nil {
		b.kill()
		return nil, fmt.Errorf("rabbittest: epmd: %w", err)
	}

	t0 := time.Now()
	b.cmd = exec.Command(Server)
	b.cmd.Dir = dir
	b.cmd.Env = env
	b.cmd.Stdout = &lockedWriter{b: b.out}
	b.cmd.Stderr = b.cmd.Stdout
	// Its own process group, so that Stop ends the script, beam.smp and
	// their helpers (and nothing else); killed with the test process.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := b.cmd.Start(); err != nil {
		b.kill()
		return nil, fmt.Errorf("rabbittest: start %s: %w", Server, err)
	}
	go func() { _ = b.cmd.Wait(); close(b.exited) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		conn, err := amqp.DialConfig(b.URL, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err == nil {
			_ = conn.Close()
			break
		}
		select {
		case <-b.exited:
			b.kill()
			return nil, fmt.Errorf("rabbittest: rabbitmq-server exited before accepting connections:\n%s", b.output())
		default:
		}
		if time.Now().After(deadline) {
			b.kill()
			return nil, fmt.Errorf("rabbittest: rabbitmq-server not accepting AMQP after 90 s (%v):\n%s", err, b.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.StartupTime = time.Since(t0)
	return b, nil
}

// Stop stops the broker (SIGTERM to its process group, SIGKILL after 20 s)
// and its epmd. It is safe to call more than once.
func (b *Broker) Stop() error {
	var err error
	b.stopOnce.Do(func() {
		if b.cmd != nil && b.cmd.Process != nil {
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-b.exited:
			case <-time.After(20 * time.Second):
				err = errors.New("rabbitmq-server did not stop within 20 s of SIGTERM; killed it")
			}
		}
		b.kill()
	})
	return err
}

// kill ends whatever is left of the broker's process group and epmd.
func (b *Broker) kill() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
	}
	if b.epmd != nil && b.epmd.Process != nil {
		_ = b.epmd.Process.Kill()
		_ = b.epmd.Wait()
	}
}

func (b *Broker) output() string {
	if w, ok := b.cmd.Stdout.(*lockedWriter); ok {
		return w.String()
	}
	return ""
}

func waitTCP(port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }
