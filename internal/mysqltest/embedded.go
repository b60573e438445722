package mysqltest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EmbeddedDatabase is the name of the in-memory database that every embedded
// server creates and that its DSN selects.
const EmbeddedDatabase = "test"

// embeddedPkg is the command that serves the embedded server. It lives in the
// application module (it needs go-mysql-server, which the library module does
// not require), so it is built from the repository's go.work.
const embeddedPkg = "./app/cmd/embedded-mysql"

// ErrNoEmbedded reports that the embedded server cannot be built here: the
// tests do not run inside the repository's Go workspace (go.work), or the go
// command is missing.
var ErrNoEmbedded = errors.New("mysqltest: the embedded server needs the repository's go.work and the go command")

// buildTimeout bounds the build of the embedded server's command: on a cold
// build cache it compiles go-mysql-server, about a minute on two cores.
const buildTimeout = 10 * time.Minute

var built struct {
	once sync.Once
	path string
	err  error
}

// embeddedBinary builds cmd/embedded-mysql once per process and returns the
// path of the executable. Test processes of several packages build it at the
// same time under go test ./...; an exclusive lock on a file in the build's
// directory makes them take turns, so a cold cache compiles go-mysql-server
// once, not once per package.
func embeddedBinary() (string, error) {
	built.once.Do(func() {
		built.path, built.err = buildEmbedded()
	})
	return built.path, built.err
}

func buildEmbedded() (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoEmbedded, err)
	}
	out, err := exec.Command(gobin, "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("%w: go env GOWORK: %v", ErrNoEmbedded, err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		return "", fmt.Errorf("%w: go env GOWORK is empty", ErrNoEmbedded)
	}
	root := filepath.Dir(work)
	if _, err := os.Stat(filepath.Join(root, embeddedPkg)); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoEmbedded, err)
	}
	// One directory per repository root: worktrees of different versions must
	// not share an executable.
	h := fnv.New64a()
	_, _ = h.Write([]byte(root))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sqlpool-embedded-mysql-%d", os.Getuid()), fmt.Sprintf("%016x", h.Sum64()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("mysqltest: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("mysqltest: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("mysqltest: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	// go build -o leaves an up-to-date executable alone, so after the first
	// build a process pays for a staleness check (well under a second), not
	// a link of go-mysql-server (seconds). The executable is replaced by
	// rename, which running copies survive.
	target := filepath.Join(dir, "embedded-mysql")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", target, embeddedPkg)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mysqltest: build the embedded server (go build %s in %s): %v\n%s", embeddedPkg, root, err, msg)
	}
	// Each process starts its servers from a hard link of its own, named by
	// its pid, so that a later build by another process cannot change the
	// executable under it. Links of processes that have exited are removed
	// here, so the directory holds one executable per version in use.
	removeStaleLinks(dir)
	link := filepath.Join(dir, fmt.Sprintf("embedded-mysql.%d", os.Getpid()))
	_ = os.Remove(link)
	if err := os.Link(target, link); err != nil {
		return "", fmt.Errorf("mysqltest: %w", err)
	}
	return link, nil
}

// removeStaleLinks removes the executables "embedded-mysql.PID" in dir whose
// process no longer exists.
func removeStaleLinks(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "embedded-mysql."))
		if err != nil || !strings.HasPrefix(e.Name(), "embedded-mysql.") || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// StartEmbedded starts an embedded go-mysql-server (cmd/embedded-mysql of
// the application module) in a child process on 127.0.0.1 at a random port,
// with an in-memory database "test" and user root with no password. It
// returns a go-sql-driver/mysql DSN of the form "root@tcp(127.0.0.1:PORT)/test"
// and a stop function, which ends the process, waits for it and is safe to
// call more than once. The child also ends when this process does (its
// standard input closes). The first call in a process builds the command,
// which on a cold build cache takes a minute or more; an error wrapping
// ErrNoEmbedded means it cannot be built here.
func StartEmbedded() (dsn string, stop func() error, err error) {
	dsn, _, stop, err = startEmbedded(true)
	return dsn, stop, err
}

// startEmbedded starts the child process. With reap false, no goroutine
// waits for it: the process of the shared server ends with this one, and
// the returned command must stay referenced (its standard input's pipe
// would otherwise be closed when it is collected, which ends the child).
func startEmbedded(reap bool) (dsn string, cmd *exec.Cmd, stop func() error, err error) {
	bin, err := embeddedBinary()
	if err != nil {
		return "", nil, nil, err
	}
	cmd = exec.Command(bin, "-stdin")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, nil, fmt.Errorf("mysqltest: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, nil, fmt.Errorf("mysqltest: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return "", nil, nil, fmt.Errorf("mysqltest: start the embedded server: %w", err)
	}
	waited := make(chan error, 1)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		if reap {
			_, _ = io.Copy(io.Discard, stdout)
			waited <- cmd.Wait()
		}
	}()
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			_ = stdin.Close()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-waited:
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					stopErr = err
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-waited
				stopErr = errors.New("mysqltest: the embedded server did not stop within 20s; killed it")
			}
		})
		return stopErr
	}
	select {
	case dsn = <-line:
	case <-time.After(time.Minute):
	}
	if !strings.HasPrefix(dsn, "root@tcp(") {
		_ = cmd.Process.Kill()
		return "", nil, nil, fmt.Errorf("mysqltest: the embedded server printed %q instead of its DSN", dsn)
	}
	return dsn, cmd, stop, nil
}

// NewEmbedded starts a private embedded server (see StartEmbedded) that is
// stopped in tb.Cleanup, and returns its DSN. Use it when a test needs a
// server of its own, for example to stop it or to see an empty database. It
// skips the test when the server cannot be built here (ErrNoEmbedded).
func NewEmbedded(tb testing.TB) string {
	tb.Helper()
	dsn, stop, err := StartEmbedded()
	if err != nil {
		embeddedFailed(tb, err)
	}
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Errorf("mysqltest: stop embedded server: %v", err)
		}
	})
	return dsn
}

var shared struct {
	once sync.Once
	dsn  string
	cmd  *exec.Cmd // kept referenced: see startEmbedded
	err  error
}

// EmbeddedDSN returns the DSN of one embedded server shared by the whole test
// process. The server is started on first use and ends with the process.
// Tests that share it should use table names of their own, since they all see
// the same database "test". It skips the test when the server cannot be
// built here (ErrNoEmbedded).
func EmbeddedDSN(tb testing.TB) string {
	tb.Helper()
	shared.once.Do(func() {
		shared.dsn, shared.cmd, _, shared.err = startEmbedded(false)
	})
	if shared.err != nil {
		embeddedFailed(tb, shared.err)
	}
	return shared.dsn
}

func embeddedFailed(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoEmbedded) {
		tb.Skipf("%v", err)
	}
	tb.Fatalf("mysqltest: start embedded server: %v", err)
}
