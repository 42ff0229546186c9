package testkit

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
	buildDir   string
)

// BuildBinary compiles the main package pkg ("./cmd/order", relative to the
// module root) once per test process and returns the binary's path.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := buildCache[pkg]; ok {
		return bin
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "onceonly-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(buildDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	buildCache[pkg] = bin
	return bin
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Proc is a child process whose output lines are collected, so a test can
// wait for a marker line and then signal or kill it.
type Proc struct {
	Cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	cond  *sync.Cond
	done  chan struct{} // the process exited
	eof   chan struct{} // every output line has been collected
	err   error
}

// Start runs bin with args and env (added to a minimal environment: PATH and
// HOME only, so the parent's variables never leak into a configuration test).
// The process is killed when the test ends.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &Proc{Cmd: cmd, done: make(chan struct{}), eof: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr) // a line over the buffer must not block the child
		p.mu.Lock()
		close(p.eof)
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", filepath.Base(bin), p.Output())
		}
	})
	return p
}

// WaitLine waits until a line containing substr was printed and returns it.
func (p *Proc) WaitLine(ctx context.Context, substr string) (string, bool) {
	stop := context.AfterFunc(ctx, func() { p.mu.Lock(); p.cond.Broadcast(); p.mu.Unlock() })
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	i := 0
	for {
		for ; i < len(p.lines); i++ {
			if strings.Contains(p.lines[i], substr) {
				return p.lines[i], true
			}
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-p.eof:
			return "", false
		default:
		}
		p.cond.Wait()
	}
}

// Wait waits up to d for the process to exit and returns its exit code
// (-1 if it did not exit in time).
func (p *Proc) Wait(d time.Duration) int {
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(d):
		return -1
	}
}

// Output returns everything printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}
