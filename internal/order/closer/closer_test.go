package closer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order/closer"
	"github.com/onceonly/onceonly/internal/order/consumer"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

var ctx = context.Background()

type fixture struct {
	db     *gorm.DB
	st     *store.Store
	rdb    *redis.Client
	prefix string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	gdb := testkit.DB(t, 20, append(append(store.Migrations(), consumer.Migrations()...), lock.Migrations()...)...)
	st, err := store.New(gdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	return fixture{gdb, st, rdb, prefix}
}

// runner is one instance's lock.Runner (10 s lease: no watchdog interferes).
func (f fixture) runner(t *testing.T, name string) *lock.Runner {
	t.Helper()
	r, err := lock.New(lock.Config{Addrs: []string{f.rdb.Options().Addr}, Expiry: 10 * time.Second, DB: f.db,
		KeyPrefix: f.prefix, Instance: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func (f fixture) closer(t *testing.T, pageSize int) (*closer.Closer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := closer.New(closer.Config{DB: f.db, Store: f.st, Timeout: 30 * time.Minute, PageSize: pageSize, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

// seed inserts n PENDING_PAYMENT orders of 700 CNY created at `at`.
func (f fixture) seed(t *testing.T, n int, at time.Time) []int64 {
	t.Helper()
	tag := testkit.RandomName("")
	var sb strings.Builder
	var args []any
	sb.WriteString("INSERT INTO orders (user_id, status, amount_cents, currency, items, submit_token, body_hash, version, created_at, updated_at) VALUES ")
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString("('u', 'PENDING_PAYMENT', 700, 'CNY', '[]', ?, 'h', 1, ?, ?)")
		args = append(args, fmt.Sprintf("%s%06d", tag, i), at.UTC(), at.UTC())
	}
	if err := f.db.Exec(sb.String(), args...).Error; err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := f.db.Raw("SELECT id FROM orders WHERE submit_token LIKE ? ORDER BY id", tag+"%").Scan(&ids).Error; err != nil || len(ids) != n {
		t.Fatalf("seeded %d (%v)", len(ids), err)
	}
	return ids
}

type row struct {
	ID      int64
	Status  string
	Version int64
}

func (f fixture) rows(t *testing.T, ids []int64) map[int64]row {
	t.Helper()
	var rs []row
	if err := f.db.Raw("SELECT id, status, version FROM orders WHERE id IN ?", ids).Scan(&rs).Error; err != nil {
		t.Fatal(err)
	}
	out := map[int64]row{}
	for _, r := range rs {
		out[r.ID] = r
	}
	return out
}

func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Only PENDING_PAYMENT orders older than the timeout are cancelled, each by
// one transition, page after page (keyset, with ties on created_at).
func TestCloser_CancelsEveryExpiredPendingOrderOnceAndNothingElse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	expired := f.seed(t, 230, old) // one created_at for all: pages tie-break on id
	expired = append(expired, f.seed(t, 20, old.Add(time.Minute))...)
	fresh := f.seed(t, 10, time.Now())
	paid := f.seed(t, 5, old)
	if err := f.db.Exec("UPDATE orders SET status = 'PAID', version = 2 WHERE id IN ?", paid).Error; err != nil {
		t.Fatal(err)
	}
	c, reg := f.closer(t, 100)
	if err := f.runner(t, "a").RunOnce(ctx, closer.Job, c.Run); err != nil {
		t.Fatal(err)
	}
	for id, r := range f.rows(t, expired) {
		if r.Status != "CANCELLED" || r.Version != 2 {
			t.Fatalf("expired order %d is %+v, want CANCELLED at version 2", id, r)
		}
	}
	for id, r := range f.rows(t, fresh) {
		if r.Status != "PENDING_PAYMENT" || r.Version != 1 {
			t.Fatalf("fresh order %d was touched: %+v", id, r)
		}
	}
	for id, r := range f.rows(t, paid) {
		if r.Status != "PAID" || r.Version != 2 {
			t.Fatalf("paid order %d was touched: %+v", id, r)
		}
	}
	if n := metric(t, reg, "onceonly_order_timed_out_total"); n != float64(len(expired)) {
		t.Fatalf("timed_out_total %v, want %d", n, len(expired))
	}
	// A second pass finds nothing.
	if err := f.runner(t, "a2").RunOnce(ctx, closer.Job, c.Run); err != nil {
		t.Fatal(err)
	}
	if n := metric(t, reg, "onceonly_order_timed_out_total"); n != float64(len(expired)) {
		t.Fatalf("a second pass cancelled more: %v", n)
	}
}

// Two closer instances: A holds the lock and is paused; its lock is lost
// (the key is deleted, as an expiry or a failover would) and B acquires —
// a newer fencing token — but has not written yet. A resumes and tries to
// cancel: the fence refuses its first page, so it cancels nothing, though
// every order is still PENDING_PAYMENT and the CAS alone would have let it.
// Then B cancels them all: never both in one tick.
func TestCloser_StaleInstanceIsRefusedByTheFenceAndCancelsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.seed(t, 50, time.Now().Add(-time.Hour))
	ra, rb := f.runner(t, "a"), f.runner(t, "b")
	ca, rega := f.closer(t, 20)
	cb, regb := f.closer(t, 20)

	aHolds, aGo, aDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		aDone <- ra.RunOnce(ctx, closer.Job, func(ctx context.Context, fence lock.Fence) error {
			close(aHolds)
			<-aGo
			return ca.Run(ctx, fence)
		})
	}()
	<-aHolds
	if err := rb.RunOnce(ctx, closer.Job, cb.Run); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("B while A holds the lock: %v, want ErrHeld", err)
	}
	if err := f.rdb.Del(ctx, ra.Key(closer.Job)).Err(); err != nil { // A's lock is lost
		t.Fatal(err)
	}
	bHolds, bGo, bDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		bDone <- rb.RunOnce(ctx, closer.Job, func(ctx context.Context, fence lock.Fence) error {
			close(bHolds)
			<-bGo
			return cb.Run(ctx, fence)
		})
	}()
	<-bHolds // B has its token
	close(aGo)
	if err := <-aDone; !errors.Is(err, lock.ErrFenced) {
		t.Fatalf("stale A: %v, want ErrFenced", err)
	}
	for id, r := range f.rows(t, ids) {
		if r.Status != "PENDING_PAYMENT" || r.Version != 1 {
			t.Fatalf("the stale closer changed order %d: %+v", id, r)
		}
	}
	close(bGo)
	if err := <-bDone; err != nil {
		t.Fatalf("B: %v", err)
	}
	for id, r := range f.rows(t, ids) {
		if r.Status != "CANCELLED" || r.Version != 2 {
			t.Fatalf("order %d after B: %+v", id, r)
		}
	}
	if a, b := metric(t, rega, "onceonly_order_timed_out_total"), metric(t, regb, "onceonly_order_timed_out_total"); a != 0 || b != 50 {
		t.Fatalf("timed out by A %v, by B %v; want 0 and 50", a, b)
	}
	if n := metric(t, rega, "onceonly_order_closer_fenced_total"); n != 1 {
		t.Fatalf("A's closer_fenced_total %v, want 1", n)
	}
}

// 200 expired orders, each with a payment.succeeded arriving while the
// closer runs. Each order ends in exactly one of PAID or CANCELLED (one
// transition), and every payment that lost to the closer is recorded as
// late, for reconciliation to refund.
func TestCloser_RacingPaymentsEachOrderEndsPaidOrCancelledAndLatePaymentsAreRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n = 200
	ids := f.seed(t, n, time.Now().Add(-time.Hour))
	cl, creg := f.closer(t, 5)
	creg2 := prometheus.NewRegistry()
	cons, err := consumer.New(consumer.Config{DB: f.db, Store: f.st, DeadLetters: failDLQ{}, Registerer: creg2})
	if err != nil {
		t.Fatal(err)
	}
	batches := make(chan []*sarama.ConsumerMessage, n)
	for i, j := range rand.Perm(n) {
		id := ids[j]
		e := events.Event{SchemaVersion: 1, EventID: "ev-" + strconv.Itoa(i), Type: events.TypeSucceeded,
			PaymentID: "pay-" + strconv.FormatInt(id, 10), OrderID: strconv.FormatInt(id, 10), AmountCents: 700, Currency: "CNY"}
		b, _ := json.Marshal(e)
		batches <- []*sarama.ConsumerMessage{{Topic: events.Topic, Partition: int32(i % 3), Offset: int64(i), Value: b}}
	}
	close(batches)

	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 { // consumer partitions
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for b := range batches {
				for attempt := 0; cons.Handle(ctx, b) != nil; attempt++ { // as the Runner retries
					if attempt == 100 {
						t.Error("a batch kept failing")
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	consumersDone := make(chan struct{})
	go func() { wg.Wait(); close(consumersDone) }()
	r := f.runner(t, "closer")
	close(start)
	for done := false; !done; {
		select {
		case <-consumersDone:
			done = true
		default:
		}
		if err := r.RunOnce(ctx, closer.Job, cl.Run); err != nil {
			t.Logf("closer pass: %v", err)
		}
	}

	paid, cancelled := 0, 0
	for id, o := range f.rows(t, ids) {
		if o.Version != 2 {
			t.Fatalf("order %d: %+v, want exactly one transition", id, o)
		}
		var outcome string
		if err := f.db.Raw("SELECT outcome FROM consumed_events WHERE order_id = ?", id).Scan(&outcome).Error; err != nil {
			t.Fatal(err)
		}
		switch {
		case o.Status == "PAID" && outcome == consumer.OutcomeApplied:
			paid++
		case o.Status == "CANCELLED" && outcome == consumer.OutcomeLate:
			cancelled++
		default:
			t.Fatalf("order %d is %s with its payment event recorded as %q", id, o.Status, outcome)
		}
	}
	t.Logf("%d paid, %d cancelled (payment recorded late)", paid, cancelled)
	if paid+cancelled != n {
		t.Fatalf("%d paid + %d cancelled, want %d", paid, cancelled, n)
	}
	if tm := metric(t, creg, "onceonly_order_timed_out_total"); tm != float64(cancelled) {
		t.Fatalf("timed_out_total %v, want %d", tm, cancelled)
	}
	if paid == 0 || cancelled == 0 {
		t.Fatalf("no race happened (%d paid, %d cancelled): the test did not exercise both sides", paid, cancelled)
	}
}

type failDLQ struct{}

func (failDLQ) Send(context.Context, *sarama.ConsumerMessage, string) error {
	return errors.New("nothing here is poison")
}
