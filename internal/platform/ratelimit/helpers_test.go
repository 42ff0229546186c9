package ratelimit

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// TestMain silences go-redis's "failed to dial" lines: the fault tests and
// BenchmarkAllowFallback cause them on purpose, thousands of times. Anything
// else go-redis logs still shows.
func TestMain(m *testing.M) {
	redis.SetLogger(quietDials{})
	os.Exit(m.Run())
}

type quietDials struct{}

func (quietDials) Printf(_ context.Context, format string, v ...any) {
	if msg := fmt.Sprintf(format, v...); !strings.Contains(msg, "failed to dial") {
		log.Print(msg)
	}
}

// fakeClock is a clock that moves only when the test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// callCounter is a go-redis hook that counts every command and every dial
// the client attempts: the ground truth for "no Redis call at all". evalsha
// counts the limiter's own calls (one per decision that asks Redis); calls
// also includes the connection handshake (HELLO, CLIENT SETINFO).
type callCounter struct {
	calls   atomic.Int64
	evalsha atomic.Int64
	dials   atomic.Int64
	mu      sync.Mutex
	names   []string
}

func (h *callCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.calls.Add(1)
		if cmd.Name() == "evalsha" {
			h.evalsha.Add(1)
		}
		h.mu.Lock()
		h.names = append(h.names, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.calls.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func (h *callCounter) commands() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.names...)
}

// countedClient is a client on addr that retries nothing (a retry would blur
// the count of calls), with the counter attached.
func countedClient(t testing.TB, addr string) (*redis.Client, *callCounter) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	h := &callCounter{}
	rdb.AddHook(h)
	return rdb, h
}

// newLimiter builds a Limiter with its own registry, failing the test on error.
func newLimiter(t testing.TB, rdb redis.Scripter, c Config) (*Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c.Registerer = reg
	l, err := New(rdb, c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l, reg
}

func fallbackGauge(l *Limiter) float64 { return testutil.ToFloat64(l.metrics.fallback) }

// closedAddr is a loopback address where nothing listens: Redis "down".
func closedAddr(t testing.TB) string {
	return "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
}

// restartRedis starts redis-server again on p's port after p.Kill, so clients
// that knew the old server reconnect to the same address (testkit only starts
// servers on fresh ports). Stopped when the test ends.
func restartRedis(t *testing.T, p *testkit.RedisProc) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server did not restart on %s: %v\n%s", p.Addr, err, strings.TrimSpace(string(log)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blackHole accepts connections and never answers: a Redis that hangs.
func blackHole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
