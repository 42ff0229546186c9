package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/app"
	"github.com/onceonly/onceonly/internal/platform/config"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/service"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The crash tests re-execute this test binary as a second order service
// process: with childEnv set, TestMain runs childService instead of the
// tests. The child is built as app.Run builds the service — configuration
// from the environment (app.LoadConfig), service.Open (the production
// database pool and Redis client), app.Mount, an HTTP server — on the
// parent's database and Redis namespace, and differs in one place only: its
// Wiring.WrapStore stops the first order insert at a crash point, prints a
// marker line and blocks there until the parent's SIGKILL.
const (
	childEnv      = "ORDER_HTTPAPI_CRASH_CHILD"
	childCrashAt  = "CHILD_CRASH_AT"     // crashBeforeInsert or crashAfterInsert
	childPrefix   = "CHILD_REDIS_PREFIX" // the parent's Redis key prefix
	markerListen  = "LISTENING"          // "LISTENING 127.0.0.1:PORT"
	markerBefore  = "INSERTING"          // the insert is about to start: claimed, nothing written
	markerAfter   = "INSERTED"           // "INSERTED <id>": committed, Finish not called
	markerFailed  = "CHILD FAILED"
	crashBefore   = "before-insert"
	crashAfter    = "after-insert"
	childLease    = 2 * time.Second
	childMaxStart = 30 * time.Second // start-up and marker waits (a cold -race binary on a busy machine)
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childService())
	}
	os.Exit(m.Run())
}

// crashStore stops the first Create at the crash point and never returns:
// the process is killed there.
type crashStore struct {
	order.Store
	at string
}

func (s *crashStore) Create(ctx context.Context, o *order.Order) error {
	if s.at == crashBefore {
		fmt.Printf("%s token=%s\n", markerBefore, o.SubmitToken)
		select {}
	}
	if err := s.Store.Create(ctx, o); err != nil {
		fmt.Printf("%s: insert: %v\n", markerFailed, err)
		return err
	}
	fmt.Printf("%s %s\n", markerAfter, order.FormatID(o.ID))
	select {}
}

func childService() int {
	fail := func(err error) int { fmt.Printf("%s: %v\n", markerFailed, err); return 1 }
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := app.LoadConfig(config.FromOS())
	if err != nil {
		return fail(err)
	}
	at := os.Getenv(childCrashAt)
	if at != crashBefore && at != crashAfter {
		return fail(fmt.Errorf("%s=%q", childCrashAt, at))
	}
	inf, err := service.Open(ctx, service.Options{
		Name: "order", DSN: cfg.MySQLDSN, Migrations: app.Migrations(),
		RedisAddr: cfg.RedisAddr, Brokers: cfg.KafkaBrokers, Log: log,
	})
	if err != nil {
		return fail(err)
	}
	defer inf.Close()
	closeAPI, err := app.Mount(app.Wiring{
		Config: cfg, DB: inf.DB, Redis: inf.Redis, Engine: inf.Engine, Registry: inf.Registry, Log: log,
		KeyPrefix: os.Getenv(childPrefix),
		WrapStore: func(s order.Store) order.Store { return &crashStore{Store: s, at: at} },
	})
	if err != nil {
		return fail(err)
	}
	defer closeAPI()
	ln, err := service.Listen(cfg.HTTPAddr)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("%s %s\n", markerListen, ln.Addr())
	if err := inf.Serve(ctx, ln); err != nil {
		return fail(err)
	}
	return 0
}

// crashRig is a parent order service and the database and Redis namespace
// it shares with a child process.
type crashRig struct {
	*env
	dsn, redisAddr string
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	// One database and one Redis for both processes: on embedded a SQLite
	// file and a miniredis listening on loopback in this process.
	dsn := testkit.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gdb, err := db.Open(ctx, dsn, db.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(gdb) }) // before DSN's drop
	if err := db.Migrate(ctx, gdb, nil, app.Migrations()...); err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	e := newEnv(t, options{db: gdb, redis: rdb, prefix: prefix,
		cfg: func(c *app.Config) { c.SubmitLease = childLease }})
	return &crashRig{env: e, dsn: dsn, redisAddr: rdb.Options().Addr}
}

// startChild starts the child order service, stopping at crashAt, and
// returns it with an env that talks to it.
func (r *crashRig) startChild(t *testing.T, crashAt string) (*testkit.Proc, *env) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := testkit.Start(t, exe, []string{
		childEnv + "=1", childCrashAt + "=" + crashAt, childPrefix + "=" + r.prefix,
		"ORDER_HTTP_ADDR=127.0.0.1:0", "MYSQL_DSN=" + r.dsn, "REDIS_ADDR=" + r.redisAddr,
		"ORDER_SUBMIT_LEASE=" + childLease.String(), "INTERNAL_API_TOKEN=" + internalToken,
		// Required by the configuration, never dialled by the submit path.
		"KAFKA_BROKERS=127.0.0.1:1", "PAYMENT_SERVICE_URL=http://127.0.0.1:1",
	}, "-test.run=^$")
	ctx, cancel := context.WithTimeout(context.Background(), childMaxStart)
	defer cancel()
	line, ok := p.WaitLine(ctx, markerListen+" ")
	if !ok {
		t.Fatalf("the child order service did not start:\n%s", p.Output())
	}
	child := *r.env
	child.url = "http://" + strings.TrimPrefix(line, markerListen+" ")
	return p, &child
}

// crashChild starts a child, sends it the submit and SIGKILLs it when it
// prints marker. It returns the marker line and the window in which the
// child claimed the key: after sent, before seen.
func (r *crashRig) crashChild(t *testing.T, crashAt, marker, key, body string) (line string, sent, seen time.Time) {
	t.Helper()
	p, child := r.startChild(t, crashAt)
	answer := make(chan resp, 1)
	sent = time.Now()
	go func() { answer <- child.submit("alice", key, body) }()
	ctx, cancel := context.WithTimeout(context.Background(), childMaxStart)
	defer cancel()
	line, ok := p.WaitLine(ctx, marker)
	seen = time.Now()
	if !ok {
		t.Fatalf("the child never printed %q:\n%s", marker, p.Output())
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait(10 * time.Second)
	if err := syscall.Kill(p.Cmd.Process.Pid, 0); err == nil {
		t.Fatal("the child is still running 10 s after SIGKILL")
	}
	if a := <-answer; a.status != 0 {
		t.Fatalf("the killed child answered the submit: %v", a)
	}
	t.Logf("child SIGKILLed %v after the submit was sent, at %q", seen.Sub(sent).Round(time.Millisecond), line)
	return line, sent, seen
}

// A second service process claims the key, and is SIGKILLed as its insert
// starts: nothing written, nothing finished or released. Another instance
// on the same database and Redis answers 409 for the same key while the
// dead process's lease runs, then claims the key and creates the one order.
func TestSubmit_ProcessKilledAfterClaimHoldsTheKeyUntilTheLeaseThenOneOrder(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := newCrashRig(t)
	key := r.token("alice")
	_, sent, seen := r.crashChild(t, crashBefore, markerBefore+" ", key, body1)
	if n := r.countOrders("submit_token = ?", key); n != 0 {
		t.Fatalf("%d order rows after a crash before the insert, want 0", n)
	}

	res := r.submitThroughLease("alice", key, body1, sent, seen, childLease, 0, childLease/2)
	if res.status != http.StatusCreated && res.status != http.StatusOK {
		t.Fatalf("retry after the dead process's lease: %v", res)
	}
	created := decodeOrder(t, res)
	if again := r.submit("alice", key, body1); again.status != http.StatusOK ||
		again.header.Get("Idempotent-Replayed") != "true" || decodeOrder(t, again).ID != created.ID {
		t.Fatalf("replay: %v", again)
	}
	if n := r.countOrders("submit_token = ?", key); n != 1 {
		t.Fatalf("%d order rows for the token, want 1", n)
	}
	t.Logf("retry after the lease answered %d, order %s; %v in all", res.status, created.ID, time.Since(start).Round(time.Millisecond))
}

// A second service process claims the key, inserts the order (committed)
// and is SIGKILLed before Finish: Redis still says in flight. Another
// instance answers 409 while the dead lease runs; after it the retry claims
// again, the UNIQUE index refuses a second row, and the answer is a 200
// replay of the order the dead process created. A different body is 422.
func TestSubmit_ProcessKilledAfterInsertBeforeFinishReplaysTheSameOrder(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := newCrashRig(t)
	key := r.token("alice")
	line, sent, seen := r.crashChild(t, crashAfter, markerAfter+" ", key, body1)
	id := strings.TrimPrefix(line, markerAfter+" ")
	n, ok := order.ParseID(id)
	if !ok {
		t.Fatalf("marker %q: no order id", line)
	}
	if n := r.countOrders("submit_token = ? AND id = ?", key, n); n != 1 {
		t.Fatalf("the dead process's order %s is not in the database (%d rows)", id, n)
	}

	res := r.submitThroughLease("alice", key, body1, sent, seen, childLease, 0, childLease/2)
	if res.status != http.StatusOK || res.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after the dead process's lease: %v (Idempotent-Replayed %q), want a 200 replay",
			res, res.header.Get("Idempotent-Replayed"))
	}
	if got := decodeOrder(t, res).ID; got != id {
		t.Fatalf("retry replayed order %s, want %s, the one the dead process inserted", got, id)
	}
	if again := r.submit("alice", key, body1); again.status != http.StatusOK || decodeOrder(t, again).ID != id {
		t.Fatalf("second replay: %v", again)
	}
	mustProblem(t, r.submit("alice", key, body2), http.StatusUnprocessableEntity, "idempotency_key_reused")
	if n := r.countOrders("submit_token = ?", key); n != 1 {
		t.Fatalf("%d order rows for the token, want 1", n)
	}
	t.Logf("retry after the lease replayed order %s; %v in all", id, time.Since(start).Round(time.Millisecond))
}
