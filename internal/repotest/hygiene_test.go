package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hygieneScript returns the absolute path of scripts/hygiene.
func hygieneScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "scripts", "hygiene"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"git", "bash", "go", "gofmt"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
	}
}

// newRepo makes a git repository in a temporary directory holding a clean Go
// module of one package, committed.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	write(t, dir, "go.mod", "module example.com/clean\n\ngo 1.26\n", 0o644)
	write(t, dir, "clean.go", "// Package clean is clean.\npackage clean\n\n// F does nothing.\nfunc F() {}\n", 0o644)
	write(t, dir, "run.sh", "#!/bin/sh\necho ok\n", 0o755)
	commit(t, dir)
	return dir
}

func write(t *testing.T, dir, name, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func commit(t *testing.T, dir string) {
	t.Helper()
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "x")
}

// runHygiene runs scripts/hygiene in dir and returns its exit status and
// stderr.
func runHygiene(t *testing.T, dir string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", hygieneScript(t))
	cmd.Dir = dir
	// The temporary repository is its own module, outside the workspace.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return 0, stderr.String()
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("running scripts/hygiene: %v", err)
	}
	return ee.ExitCode(), stderr.String()
}

// TestHygiene proves that scripts/hygiene passes on a clean repository and
// fails, naming the file, on each kind of violation it checks.
func TestHygiene(t *testing.T) {
	needTools(t)
	elf := "\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 57)
	big := strings.Repeat("x", 1<<20+1)
	cases := []struct {
		name   string
		file   string
		data   string
		mode   os.FileMode
		fail   bool
		reason string // a word the failure message must contain
	}{
		{name: "clean"},
		{name: "executable ELF", file: "bin/tool", data: elf, mode: 0o755, fail: true, reason: "ELF"},
		{name: "ELF without x bit", file: "load", data: elf, mode: 0o644, fail: true, reason: "ELF"},
		{name: "Mach-O", file: "tool-darwin", data: "\xcf\xfa\xed\xfe" + strings.Repeat("\x00", 60), mode: 0o755, fail: true, reason: "Mach-O"},
		{name: "PE", file: "tool.exe", data: "MZ\x90\x00" + strings.Repeat("\x00", 60), mode: 0o644, fail: true, reason: "PE"},
		{name: "executable text that is not a script", file: "notes.txt", data: "hello\n", mode: 0o755, fail: true, reason: "executable bit"},
		{name: "file over 1 MB", file: "data/blob.json", data: big, mode: 0o644, fail: true, reason: "1 MB"},
		{name: "large image in docs/img", file: "docs/img/shot.png", data: big, mode: 0o644},
		{name: "1 MB exactly", file: "data/edge.json", data: big[1:], mode: 0o644},
		{name: "gofmt", file: "ugly.go", data: "package clean\nfunc  G( ) {}\n", mode: 0o644, fail: true, reason: "gofmt"},
		{name: "go vet", file: "vet.go", data: "package clean\n\nimport \"fmt\"\n\n// H misuses Printf.\nfunc H() { fmt.Printf(\"%d\\n\", \"s\") }\n", mode: 0o644, fail: true, reason: "go vet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t)
			if c.file != "" {
				write(t, dir, c.file, c.data, c.mode)
				commit(t, dir)
			}
			rc, stderr := runHygiene(t, dir)
			if !c.fail {
				if rc != 0 {
					t.Fatalf("exit status %d on a clean repository, want 0\n%s", rc, stderr)
				}
				return
			}
			if rc != 1 {
				t.Fatalf("exit status %d, want 1\n%s", rc, stderr)
			}
			if c.reason != "go vet" && !strings.Contains(stderr, "hygiene: "+c.file+":") {
				t.Errorf("the failure does not name %s:\n%s", c.file, stderr)
			}
			if !strings.Contains(stderr, c.reason) {
				t.Errorf("the failure does not say %q:\n%s", c.reason, stderr)
			}
		})
	}
}

// TestHygieneSkipsUntrackedAndDeleted checks that only tracked files that
// exist are checked: an untracked binary passes, and so does a tracked file
// deleted from the work tree.
func TestHygieneSkipsUntrackedAndDeleted(t *testing.T) {
	needTools(t)
	dir := newRepo(t)
	write(t, dir, "untracked-bin", "\x7fELF"+strings.Repeat("\x00", 60), 0o755)
	if err := os.Remove(filepath.Join(dir, "run.sh")); err != nil {
		t.Fatal(err)
	}
	if rc, stderr := runHygiene(t, dir); rc != 0 {
		t.Fatalf("exit status %d, want 0\n%s", rc, stderr)
	}
}
