package httpapi_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment/app"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// proxiedDB opens the test's MariaDB database twice: through a toxiproxy
// (what the service uses, so the test can cut it) and directly (what the
// test checks with). It needs a real server; SQLite has no connection to cut.
func proxiedDB(t *testing.T) (service, direct *gorm.DB, px *testkit.Proxy) {
	t.Helper()
	if os.Getenv("TEST_MYSQL_DSN") == "" {
		testkit.NeedReal(t, "cutting the database connection needs MariaDB (set TEST_MYSQL_DSN); SQLite is a file in process")
	}
	direct = testkit.DB(t, 5, app.Migrations()...)
	cfg, err := mysql.ParseDSN(os.Getenv("TEST_MYSQL_DSN")) // the server's address
	if err != nil {
		t.Fatal(err)
	}
	var name string
	if err := direct.Raw("SELECT DATABASE()").Scan(&name).Error; err != nil {
		t.Fatal(err)
	}
	px = testkit.NewProxy(t, cfg.Addr)
	cfg.Addr, cfg.DBName = px.Addr, name
	// Short timeouts: a cut connection must fail a request in well under a
	// gateway's patience, not after the driver's 30 s.
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, 5*time.Second, 5*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	service, err = db.Open(ctx, cfg.FormatDSN(), db.Options{MaxOpenConns: 10, Logger: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(service) })
	return service, direct, px
}

// The database is unreachable when the gateway calls: 503, and nothing is
// half-written — also when the connection dies inside the transaction,
// between the payment's UPDATE and the outbox INSERT. The gateway's retry
// after the database returns is processed, and exactly one outbox row
// exists.
func TestCallback_DatabaseDownAnswers503WritesNothingAndTheRetrySucceeds(t *testing.T) {
	t.Parallel()
	svcDB, direct, px := proxiedDB(t)
	// Cut the connection at the moment the outbox INSERT is about to be
	// sent: the payment's UPDATE has run in the open transaction.
	var cutInTx atomic.Bool
	if err := svcDB.Callback().Raw().Before("gorm:raw").Register("test:cut_before_outbox_insert", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "INSERT INTO outbox_events") && cutInTx.CompareAndSwap(true, false) {
			px.Cut()
		}
	}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, options{gdb: svcDB})
	e.db = direct // every check below bypasses the proxy
	p := e.create("o-1", 2500, "CNY")
	body := cbBody(p, "SUCCEEDED", "txn-1")
	check := func(when string) {
		t.Helper()
		if r := e.row(p.ID); r.Status != "PENDING" || r.Version != 1 || r.GatewayTxnID != nil {
			t.Fatalf("%s: payment %+v, want untouched PENDING", when, r)
		}
		if n := e.count("outbox_events", ""); n != 0 {
			t.Fatalf("%s: %d outbox rows, want 0", when, n)
		}
	}

	// 1. Down before the callback arrives.
	px.Cut()
	start := time.Now()
	pr := mustProblem(t, e.callback(body), http.StatusServiceUnavailable, "dependency_unavailable")
	t.Logf("database down: 503 in %v (%q)", time.Since(start).Round(time.Millisecond), pr.Detail)
	if strings.Contains(pr.Detail, px.Addr) || strings.Contains(pr.Detail, "tcp") {
		t.Errorf("detail %q leaks the cause", pr.Detail)
	}
	check("down before the callback")
	px.Restore()

	// 2. Down in the middle of the transaction.
	retryUntil(t, e, body, "the first retry after the restore", func(r resp) bool {
		return r.status == http.StatusServiceUnavailable || r.status == http.StatusOK
	}, func() { cutInTx.Store(true) })
	if cutInTx.Load() {
		t.Fatal("the connection was never cut inside the transaction")
	}
	check("cut between UPDATE and outbox INSERT")
	px.Restore()

	// 3. The gateway retries until it sees a 2xx.
	final := retryUntil(t, e, body, "a 200 after the restore", func(r resp) bool { return r.status == http.StatusOK }, nil)
	mustResult(t, final, "processed")
	if r := e.row(p.ID); r.Status != "SUCCEEDED" || r.Version != 2 {
		t.Fatalf("payment after the retry: %+v", r)
	}
	if n := e.count("outbox_events", ""); n != 1 {
		t.Fatalf("%d outbox rows, want exactly 1", n)
	}
	mustResult(t, e.callback(body), "duplicate")
}

// retryUntil sends the callback as a retrying gateway would, every 100 ms
// for up to 15 s, until done accepts the answer. before runs before each
// attempt.
func retryUntil(t *testing.T, e *env, body, what string, done func(resp) bool, before func()) resp {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if before != nil {
			before()
		}
		r := e.callback(body)
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 15 s; last answer %v", what, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
