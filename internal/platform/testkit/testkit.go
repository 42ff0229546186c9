// Package testkit gives each test its own infrastructure: a fresh database
// (random name, dropped after), a Redis namespace, a Kafka cluster, private
// redis-server processes. Embedded stand-ins by default; TEST_MYSQL_DSN and
// TEST_REDIS_ADDR switch to real servers, and TEST_REQUIRE_REAL=1 turns a
// missing real server into a failure instead of a skip.
package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
)

// RequireReal reports whether TEST_REQUIRE_REAL=1.
func RequireReal() bool { return os.Getenv("TEST_REQUIRE_REAL") == "1" }

// NeedReal skips the test (or fails it under TEST_REQUIRE_REAL=1) with why.
func NeedReal(t testing.TB, why string) {
	t.Helper()
	if RequireReal() {
		t.Fatalf("TEST_REQUIRE_REAL=1 but %s", why)
	}
	t.Skipf("skipped: %s", why)
}

// RandomName returns prefix followed by 12 random hex characters.
func RandomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Logger returns a logger that writes into the test log (shown on failure or -v).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
