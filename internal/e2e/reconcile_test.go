package e2e_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
)

type report struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Error       *string
	Checked     int `json:"checked"`
	Matched     int `json:"matched"`
	Republished int `json:"republished"`
	Queried     int `json:"queried"`
	Refunded    int `json:"refunded"`
	Flagged     int `json:"flagged"`
	Diffs       []struct {
		Kind, PaymentID, OrderID, Action string
	} `json:"diffs"`
}

// reconcile triggers a run and returns its report, waiting out a run that
// holds the lock (the schedule runs once at start).
func (s *system) reconcile() report {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r report
		code, _ := s.do("POST", s.PaymentURL+"/v1/reconciliations", bearer(), nil, &r)
		if code == http.StatusOK {
			must(s.t, r.Status == "succeeded", "reconciliation run %s: %s %v", r.ID, r.Status, r.Error)
			return r
		}
		must(s.t, code == http.StatusConflict && time.Now().Before(deadline), "POST /v1/reconciliations: %d", code)
		time.Sleep(100 * time.Millisecond)
	}
}

func openDB(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	gdb, err := db.Open(context.Background(), dsn, db.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(gdb) })
	return gdb
}

// forEach runs fn for 0..n-1 on a few workers.
func forEach(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// Kafka never learns that a business event went missing; reconciliation
// does. 50 of the payments' events are marked published without being sent
// (the relay is held off by its lock meanwhile); one run re-drives exactly
// those, the consumer pays their orders, and a second run finds nothing.
func TestE2E_ReconciliationRepublishesEventsLostBeforeKafka(t *testing.T) {
	t.Parallel()
	n, lost := 1000, 50
	if !realServers() {
		// SQLite has one writer and the race detector slows it ~10x; the full
		// size runs against MariaDB in CI.
		n, lost = 200, 20
	}
	relayKey := "onceonly:lock:payment-outbox-relay"
	var rdb *redis.Client
	s := startSystemWith(t, map[string]string{"RECONCILE_GRACE": "1s"}, func(s *system) {
		rdb = redis.NewClient(&redis.Options{Addr: s.RedisAddr})
		t.Cleanup(func() { rdb.Close() })
		// Hold the relay's lock so no event leaves before some are "lost".
		must(t, rdb.Set(context.Background(), relayKey, "e2e-test", 5*time.Minute).Err() == nil, "hold relay lock")
	})

	orders := make([]order, n)
	payments := make([]string, n)
	forEach(n, 16, func(i int) {
		orders[i] = s.placeOrder("carol", int64(100+i))
		var p payment
		code, _ := s.do("POST", s.OrderURL+"/v1/orders/"+orders[i].ID+"/pay", user("carol"), nil, &p)
		must(t, code == http.StatusCreated, "/pay %d: %d", i, code)
		payments[i] = p.PaymentID
		var sb struct{ Results map[string]int }
		code, _ = s.do("POST", s.PaymentURL+"/v1/sandbox/payments/"+p.PaymentID+"/complete", nil, map[string]any{"status": "SUCCEEDED"}, &sb)
		must(t, code == http.StatusOK && sb.Results["processed"] == 1, "sandbox %d: %d %v", i, code, sb.Results)
	})

	pdb := openDB(t, s.PaymentDSN)
	var total int64
	pdb.Table("outbox_events").Where("published_at IS NULL").Count(&total)
	must(t, total == int64(n), "%d unpublished events while the relay is held off, want %d", total, n)
	// "Lost": marked published, never sent.
	res := pdb.Exec("UPDATE outbox_events SET published_at = ? WHERE id IN (SELECT id FROM (SELECT id FROM outbox_events ORDER BY id LIMIT ?) AS first)", db.Now(), lost)
	must(t, res.Error == nil && res.RowsAffected == int64(lost), "drop events: %v %d", res.Error, res.RowsAffected)
	must(t, rdb.Del(context.Background(), relayKey).Err() == nil, "release relay lock")

	odb := openDB(t, s.OrderDSN)
	paidCount := func() int64 {
		var c int64
		odb.Table("orders").Where("status = ?", "PAID").Count(&c)
		return c
	}
	waitFor(t, 90*time.Second, func() bool { return paidCount() == int64(n-lost) }, "the delivered events pay their orders")
	time.Sleep(1100 * time.Millisecond) // past RECONCILE_GRACE
	must(t, paidCount() == int64(n-lost), "orders paid before reconciliation = %d, want %d", paidCount(), n-lost)

	first := s.reconcile()
	must(t, first.Republished == lost && first.Checked == n && first.Matched == n-lost && first.Refunded == 0 && first.Flagged == 0,
		"first run: %+v, want %d republished of %d checked", first, lost, n)
	waitFor(t, 60*time.Second, func() bool { return paidCount() == int64(n) }, "every order PAID after the re-drive")

	time.Sleep(1100 * time.Millisecond)
	second := s.reconcile()
	must(t, second.Republished == 0 && second.Matched == n && len(second.Diffs) == 0,
		"second run: %+v, want nothing to repair", second)
	// Each order was paid once: created (1), payment attached (+1), PAID (+1).
	var overPaid int64
	odb.Table("orders").Where("version > 3").Count(&overPaid)
	must(t, overPaid == 0, "%d orders transitioned more than once", overPaid)
}

// A payment that succeeds after the timeout closer cancelled its order is
// refunded once; the order stays CANCELLED; a second run does nothing more.
func TestE2E_LatePaymentForATimedOutOrderIsRefundedOnce(t *testing.T) {
	t.Parallel()
	s := startSystem(t, map[string]string{
		"ORDER_PAYMENT_TIMEOUT":  "1s",
		"ORDER_TIMEOUT_INTERVAL": "200ms",
		"RECONCILE_GRACE":        "1s",
	})
	o := s.placeOrder("dave", 4200)
	var p payment
	code, _ := s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("dave"), nil, &p)
	must(t, code == http.StatusCreated, "/pay: %d", code)
	s.waitOrder("dave", o.ID, 30*time.Second, func(o order) bool { return o.Status == "CANCELLED" })

	var sb struct{ Results map[string]int }
	code, _ = s.do("POST", s.PaymentURL+"/v1/sandbox/payments/"+p.PaymentID+"/complete", nil, map[string]any{"status": "SUCCEEDED", "copies": 3}, &sb)
	must(t, code == http.StatusOK && sb.Results["processed"] == 1, "late success: %d %v", code, sb.Results)
	time.Sleep(1200 * time.Millisecond) // past RECONCILE_GRACE

	first := s.reconcile()
	must(t, first.Refunded == 1, "first run: %+v, want 1 refund", first)
	var got struct{ Status string }
	s.do("GET", s.PaymentURL+"/v1/payments/"+p.PaymentID, bearer(), nil, &got)
	must(t, got.Status == "REFUNDED", "payment after the run: %s", got.Status)

	time.Sleep(1200 * time.Millisecond)
	second := s.reconcile()
	must(t, second.Refunded == 0 && second.Republished == 0, "second run: %+v, want nothing more", second)
	final := s.waitOrder("dave", o.ID, time.Second, func(order) bool { return true })
	must(t, final.Status == "CANCELLED", "order after the refund: %s", final.Status)

	// One refund at the gateway, whatever the number of runs.
	var refunds int64
	openDB(t, s.PaymentDSN).Table("sim_gateway_records").Where("kind = ?", "refund").Count(&refunds)
	must(t, refunds == 1, "%d refunds recorded at the gateway, want 1", refunds)
}

func waitFor(t testing.TB, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
