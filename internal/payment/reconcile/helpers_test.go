package reconcile_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/app"
	"github.com/onceonly/onceonly/internal/payment/gateway"
	"github.com/onceonly/onceonly/internal/payment/orderclient"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/payment/store"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

const token = "test-internal-token"

// fixture is reconciliation's parts built by hand on the test's own
// database and Redis, against a fake order service.
type fixture struct {
	t      testing.TB
	db     *gorm.DB
	store  *store.Store
	svc    *payment.Service
	sim    *gateway.Simulator
	locker *lock.Runner
	fake   *testkit.FakeOrders
	orders *orderclient.Client
}

func newFixture(t testing.TB, maxOpen int) *fixture {
	t.Helper()
	gdb := testkit.DB(t, maxOpen, app.Migrations()...)
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(gdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := payment.NewService(st, payment.Config{Secrets: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := gateway.NewSimulator(gateway.Config{DB: gdb, Payments: svc, Secret: "k",
		CallbackURL: "http://127.0.0.1:1/v1/payments/callback"})
	if err != nil {
		t.Fatal(err)
	}
	locker, err := lock.New(lock.Config{Addrs: []string{rdb.Options().Addr}, DB: gdb, KeyPrefix: prefix, Expiry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close() })
	fake := testkit.NewFakeOrders(t, token)
	orders, err := orderclient.New(orderclient.Config{BaseURL: fake.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, db: gdb, store: st, svc: svc, sim: sim, locker: locker, fake: fake, orders: orders}
}

// reconciler builds a Reconciler on the fixture; mod adjusts its Config.
func (f *fixture) reconciler(mod func(*reconcile.Config)) *reconcile.Reconciler {
	f.t.Helper()
	cfg := reconcile.Config{Store: f.store, Orders: f.orders, Gateway: f.sim, Payments: f.svc, Locker: f.locker,
		Window: time.Hour, Grace: 30 * time.Second, Timeout: 30 * time.Second, Registerer: prometheus.NewRegistry()}
	if mod != nil {
		mod(&cfg)
	}
	r, err := reconcile.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(r.Close)
	return r
}

// paid makes order's payment SUCCEEDED through the callback path, dates it
// age ago and marks its event published (relayed, or dropped on the way).
func (f *fixture) paid(order string, amount int64, age time.Duration) payment.Payment {
	f.t.Helper()
	ctx := context.Background()
	p, _, err := f.svc.Create(ctx, payment.NewPayment{OrderID: order, UserID: "u", AmountCents: amount, Currency: "CNY"})
	if err != nil {
		f.t.Fatal(err)
	}
	if res, err := f.svc.ApplyCallback(ctx, payment.OutcomeCallback(p,
		payment.Outcome{Status: payment.Succeeded, GatewayTxnID: "txn-" + order}, "")); err != nil || res != payment.ResultProcessed {
		f.t.Fatalf("apply: %v %v", res, err)
	}
	at := time.Now().UTC().Add(-age).Truncate(time.Microsecond)
	if err := f.db.Exec("UPDATE payments SET created_at = ?, updated_at = ? WHERE id = ?", at, at, p.ID).Error; err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.Exec("UPDATE outbox_events SET published_at = ? WHERE msg_key = ?", at, order).Error; err != nil {
		f.t.Fatal(err)
	}
	got, err := f.store.Get(ctx, p.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// order puts p's order into the fake order service with status.
func (f *fixture) order(p payment.Payment, status string) {
	f.fake.Put(testkit.FakeOrder{ID: p.OrderID, Status: status, PaymentID: strconv.FormatInt(p.ID, 10),
		AmountCents: p.AmountCents, Currency: p.Currency, UpdatedAt: p.UpdatedAt})
}

func (f *fixture) count(table, where string, args ...any) int64 {
	f.t.Helper()
	var n int64
	q := f.db.Table(table)
	if where != "" {
		q = q.Where(where, args...)
	}
	if err := q.Count(&n).Error; err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) status(id int64) payment.Status {
	f.t.Helper()
	p, err := f.store.Get(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Status
}
