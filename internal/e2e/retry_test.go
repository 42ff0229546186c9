package e2e_test

import (
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// After the gateway reports a failure the order stays payable; /pay makes
// attempt 2, and 100 concurrent /pay calls still yield one live payment.
func TestE2E_PayAfterAFailedAttemptMakesOneNewLivePayment(t *testing.T) {
	t.Parallel()
	s := startSystem(t, nil)
	o := s.placeOrder("erin", 750)
	var first payment
	code, _ := s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("erin"), nil, &first)
	must(t, code == http.StatusCreated, "/pay: %d", code)
	code, _ = s.do("POST", s.PaymentURL+"/v1/sandbox/payments/"+first.PaymentID+"/complete", nil, map[string]any{"status": "FAILED"}, nil)
	must(t, code == http.StatusOK, "sandbox FAILED: %d", code)

	var mu sync.Mutex
	ids := map[string]int{}
	codes := map[int]int{}
	forEach(100, 100, func(int) {
		var p payment
		code, _ := s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("erin"), nil, &p)
		mu.Lock()
		defer mu.Unlock()
		codes[code]++
		if code == http.StatusOK || code == http.StatusCreated {
			ids[p.PaymentID]++
		}
	})
	must(t, codes[http.StatusOK]+codes[http.StatusCreated] == 100, "answers %v, want 100 × 200/201", codes)
	must(t, len(ids) == 1, "live payments handed out: %v, want exactly one", ids)
	var second string
	for id := range ids {
		second = id
	}
	must(t, second != first.PaymentID, "the failed payment %s was handed out again", first.PaymentID)
	var p2 struct {
		Attempt int    `json:"attempt"`
		Status  string `json:"status"`
	}
	s.do("GET", s.PaymentURL+"/v1/payments/"+second, bearer(), nil, &p2)
	must(t, p2.Attempt == 2 && p2.Status == "PENDING", "new payment: %+v, want attempt 2 PENDING", p2)

	s.do("POST", s.PaymentURL+"/v1/sandbox/payments/"+second+"/complete", nil, map[string]any{"status": "SUCCEEDED"}, nil)
	paid := s.waitOrder("erin", o.ID, 30*time.Second, func(o order) bool { return o.Status == "PAID" })
	must(t, paid.PaymentID != nil && *paid.PaymentID == second, "PAID order's payment_id %v, want %s", paid.PaymentID, second)
}

// BenchmarkCallbackToPaid measures the asynchronous chain a user waits on:
// from the gateway's signed callback committing (payments.updated_at) to
// the order turning PAID (orders.updated_at), through the outbox relay,
// Kafka and the consumer. Both stamps come from one clock (db.Now()).
// Reported, never asserted: TEST_MYSQL_DSN=… TEST_REDIS_ADDR=… go test
// -run '^$' -bench CallbackToPaid -benchtime 1x ./internal/e2e/
func BenchmarkCallbackToPaid(b *testing.B) {
	for range b.N {
		benchCallbackToPaid(b)
	}
}

func benchCallbackToPaid(b *testing.B) {
	b.StopTimer()
	s := startSystem(b, nil)
	const n = 300
	orders := make([]order, n)
	payments := make([]string, n)
	forEach(n, 16, func(i int) {
		orders[i] = s.placeOrder("bench", 100)
		var p payment
		s.do("POST", s.OrderURL+"/v1/orders/"+orders[i].ID+"/pay", user("bench"), nil, &p)
		payments[i] = p.PaymentID
	})
	b.StartTimer()
	start := time.Now()
	forEach(n, 8, func(i int) {
		s.do("POST", s.PaymentURL+"/v1/sandbox/payments/"+payments[i]+"/complete", nil, map[string]any{"status": "SUCCEEDED"}, nil)
	})
	odb, pdb := openDB(b, s.OrderDSN), openDB(b, s.PaymentDSN)
	for {
		var c int64
		odb.Table("orders").Where("status = ?", "PAID").Count(&c)
		if c == n {
			break
		}
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("only %d of %d orders PAID", c, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	type stamp struct {
		ID        string
		UpdatedAt time.Time
	}
	var paidAt, succeededAt []stamp
	odb.Table("orders").Select("CAST(id AS CHAR) AS id, updated_at").Scan(&paidAt)
	pdb.Table("payments").Select("order_id AS id, updated_at").Scan(&succeededAt)
	at := map[string]time.Time{}
	for _, p := range succeededAt {
		at[p.ID] = p.UpdatedAt
	}
	var lat []time.Duration
	for _, o := range paidAt {
		if t0, ok := at[o.ID]; ok {
			lat = append(lat, o.UpdatedAt.Sub(t0))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) != n {
		b.Fatalf("paired %d of %d orders", len(lat), n)
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "orders_paid/s")
}
