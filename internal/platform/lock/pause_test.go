package lock_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The child protocol: the test binary runs as holder A when childEnv is set.
// It prints "HELD token=N" once it holds the lock and a token, reads one line
// from stdin, attempts its fenced write and prints "WRITE fenced|accepted|error
// ...", then waits for its job context and prints "CTX cause=...".
const (
	childEnv    = "ONCEONLY_LOCK_TEST_CHILD"
	childDSN    = "ONCEONLY_LOCK_TEST_DSN"
	childRedis  = "ONCEONLY_LOCK_TEST_REDIS"
	childPrefix = "ONCEONLY_LOCK_TEST_PREFIX"
	childJob    = "ONCEONLY_LOCK_TEST_JOB"
	childExpiry = "ONCEONLY_LOCK_TEST_EXPIRY"
)

func childHolder() int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	expiry, err := time.ParseDuration(os.Getenv(childExpiry))
	if err != nil {
		fmt.Println("ERROR", err)
		return 2
	}
	gdb, err := db.Open(ctx, os.Getenv(childDSN), db.Options{MaxOpenConns: 4})
	if err != nil {
		fmt.Println("ERROR", err)
		return 2
	}
	defer db.Close(gdb)
	r, err := lock.New(lock.Config{Addrs: []string{os.Getenv(childRedis)}, KeyPrefix: os.Getenv(childPrefix),
		Expiry: expiry, DB: gdb, Instance: "A", Logger: log})
	if err != nil {
		fmt.Println("ERROR", err)
		return 2
	}
	defer r.Close()
	stdin := bufio.NewScanner(os.Stdin)
	job := os.Getenv(childJob)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.RunOnce(ctx, job, func(ctx context.Context, f lock.Fence) error {
			fmt.Printf("HELD token=%d\n", f.Token())
			// The parent stops this process here and resumes it after B wrote.
			if !stdin.Scan() {
				return errors.New("stdin closed")
			}
			// The write ignores the job's cancellation on purpose: it is the
			// case the watchdog cannot catch (a write already under way when
			// the pause began, or a job that does not check its context), and
			// only the fence can stop it.
			switch err := write(context.WithoutCancel(ctx), gdb, f, "A"); {
			case errors.Is(err, lock.ErrFenced):
				fmt.Println("WRITE fenced")
			case err == nil:
				fmt.Println("WRITE accepted")
			default:
				fmt.Println("WRITE error", err)
			}
			select {
			case <-ctx.Done():
				fmt.Printf("CTX cause=%v\n", context.Cause(ctx))
			case <-time.After(20 * time.Second):
				fmt.Println("CTX not cancelled")
			}
			return nil
		})
		if err == nil {
			return 0
		}
		if time.Now().After(deadline) || !(errors.Is(err, lock.ErrHeld) || errors.Is(err, lock.ErrUnavailable)) {
			fmt.Println("ERROR", err)
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPause_HolderStoppedPastItsLeaseIsFencedAndItsContextCancelled(t *testing.T) {
	t.Parallel()
	const job, expiry = "pause", 2 * time.Second
	dsn := testkit.DSN(t)
	ctx := context.Background()
	gdb, err := db.Open(ctx, dsn, db.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(gdb) })
	if err := db.Migrate(ctx, gdb, nil, migrations()...); err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	b := newRunner(t, lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, Expiry: expiry, DB: gdb, Instance: "B"})

	// Holder A: this test binary in a child process.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", childDSN+"="+dsn, childRedis+"="+rdb.Options().Addr,
		childPrefix+"="+prefix, childJob+"="+job, childExpiry+"="+expiry.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed after Wait; then waitErr is set
	var waitErr error
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("holder A's log:\n%s", stderr.String())
		}
	})
	expect := func(prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("holder A exited before printing %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return strings.TrimPrefix(l, prefix)
				}
				t.Logf("holder A: %s", l)
			case <-time.After(60 * time.Second):
				t.Fatalf("holder A did not print %q", prefix)
			}
		}
	}

	tokenA, err := strconv.ParseInt(expect("HELD token="), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// B takes over once A's lease has run out (A cannot extend while stopped).
	var tokenB int64
	var writeB error
	waitFor(t, expiry+20*time.Second, "B to acquire after A's lease expired", func() bool {
		err := b.RunOnce(ctx, job, func(ctx context.Context, f lock.Fence) error {
			tokenB = f.Token()
			writeB = write(ctx, gdb, f, "B")
			return writeB
		})
		if errors.Is(err, lock.ErrHeld) || errors.Is(err, lock.ErrUnavailable) {
			return false
		}
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		return true
	})
	if writeB != nil || tokenB <= tokenA {
		t.Fatalf("B: write %v, token %d (A's %d)", writeB, tokenB, tokenA)
	}

	// A resumes and tries its write with its old token.
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "write\n"); err != nil {
		t.Fatal(err)
	}
	if got := expect("WRITE "); got != "fenced" {
		t.Fatalf("A's write after the pause: %q, want fenced", got)
	}
	if cause := expect("CTX "); !strings.Contains(cause, lock.ErrLockLost.Error()) {
		t.Fatalf("A's context: %q, want cancelled with cause ErrLockLost", cause)
	}
	recv(t, exited, 30*time.Second, "holder A to exit")
	if waitErr != nil {
		t.Fatalf("holder A: %v", waitErr)
	}

	if a, b := countWrites(t, gdb, job, "A"), countWrites(t, gdb, job, "B"); a != 0 || b != 1 {
		t.Fatalf("writes accepted: A (stale) %d, B %d; want 0 and 1", a, b)
	}
	if n := rdb.Exists(ctx, b.Key(job)).Val(); n != 0 {
		t.Fatal("A's watchdog re-created the lock after resuming (SET NX on extend)")
	}
	t.Logf("stale writes refused: 1, accepted: 0 (A token %d, B token %d)", tokenA, tokenB)
}
