package testkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/embedded"
)

// Redis returns a client and a key prefix private to the test. On
// TEST_REDIS_ADDR the test shares the server and must put prefix in front of
// every key it writes; the keys are deleted when the test ends (never a FLUSH).
// Without it, a private miniredis is started.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	prefix := RandomName("t:") + ":"
	addr := os.Getenv("TEST_REDIS_ADDR")
	if addr == "" {
		if RequireReal() {
			t.Fatal("TEST_REQUIRE_REAL=1 but TEST_REDIS_ADDR is not set")
		}
		m, err := embedded.Redis()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		addr = m.Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v", addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return rdb, prefix
}

// RedisProc is a private redis-server process started for one test.
type RedisProc struct {
	Addr string
	Port int
	cmd  *exec.Cmd
	t    testing.TB
}

// RedisServer starts a private redis-server on a free loopback port (for
// failover and quorum tests), stopped when the test ends. Without the binary
// the test is skipped, or fails under TEST_REQUIRE_REAL=1.
func RedisServer(t testing.TB, extraArgs ...string) *RedisProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		NeedReal(t, "redis-server is not installed")
	}
	port := FreePort(t)
	dir := t.TempDir()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, extraArgs...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	p := &RedisProc{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, cmd: cmd, t: t}
	t.Cleanup(p.Kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s did not start: %v\n%s", p.Addr, err, strings.TrimSpace(string(log)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server at once (SIGKILL); safe to call twice.
func (p *RedisProc) Kill() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// Client returns a client for the server, closed when the test ends.
func (p *RedisProc) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: -1})
	p.t.Cleanup(func() { c.Close() })
	return c
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
