package orderclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment/orderclient"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

const token = "tok"

// server answers with answer(n) for the n-th call (from 1) and counts them.
func server(t *testing.T, answer func(n int64, w http.ResponseWriter)) (*orderclient.Client, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("request without the bearer token: %v", r.Header)
		}
		answer(calls.Add(1), w)
	}))
	t.Cleanup(srv.Close)
	c, err := orderclient.New(orderclient.Config{BaseURL: srv.URL, Token: token, Timeout: time.Second,
		Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

const oneOrder = `{"orders":[{"id":"7","status":"PAID","payment_id":"3","amount_cents":100,"currency":"CNY","updated_at":"2026-05-01T12:00:00.123456Z"}]}`

func TestClient_RetriesTransientFailuresBoundedly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		status    []int // answers in turn; 200 sends oneOrder
		wantCalls int64
		wantErr   string
	}{
		{"503 twice, then 200", []int{503, 503, 200}, 3, ""},
		{"429 then 200", []int{429, 200}, 2, ""},
		{"always 503", []int{503, 503, 503, 503}, 3, "503 Service Unavailable (dependency_unavailable) (attempt 3 of 3)"},
		{"401 is not retried", []int{401, 200}, 1, "401 Unauthorized (unauthenticated) (attempt 1 of 3)"},
		{"400 is not retried", []int{400, 200}, 1, "400 Bad Request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			client, calls := server(t, func(n int64, w http.ResponseWriter) {
				st := c.status[min(int(n), len(c.status))-1]
				if st != 200 {
					w.WriteHeader(st)
					fmt.Fprintf(w, `{"code":%q}`, map[int]string{503: "dependency_unavailable", 401: "unauthenticated",
						400: "invalid_request", 429: "rate_limited"}[st])
					return
				}
				fmt.Fprint(w, oneOrder)
			})
			got, err := client.BatchGet(context.Background(), []string{"7", "8"})
			if calls.Load() != c.wantCalls {
				t.Errorf("%d calls, want %d", calls.Load(), c.wantCalls)
			}
			if c.wantErr == "" {
				want := reconcile.Order{ID: "7", Status: "PAID", PaymentID: "3", AmountCents: 100, Currency: "CNY",
					UpdatedAt: time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)}
				if err != nil || len(got) != 1 || got[0] != want {
					t.Fatalf("BatchGet = %+v, %v; want [%+v]", got, err, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "POST /internal/v1/orders/batch-get") {
				t.Fatalf("BatchGet error %v, want one naming the route and %q", err, c.wantErr)
			}
		})
	}
}

// An answer that does not decode completely is not an answer: nothing may
// be classified on half of it.
func TestClient_IncompleteAnswerIsAnError(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"truncated":              oneOrder[:40],
		"bad time":               strings.Replace(oneOrder, "2026-05-01T12:00:00.123456Z", "yesterday", 1),
		"order without a status": `{"orders":[{"id":"7","amount_cents":1,"currency":"CNY","updated_at":"2026-05-01T12:00:00Z"}]}`,
	} {
		client, _ := server(t, func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, body) })
		if got, err := client.BatchGet(context.Background(), []string{"7"}); err == nil {
			t.Errorf("%s: BatchGet = %+v, want an error", name, got)
		}
	}
}

func TestClient_RefusesABatchOverTheBoundWithoutCalling(t *testing.T) {
	t.Parallel()
	client, calls := server(t, func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, `{"orders":[]}`) })
	ids := make([]string, reconcile.MaxBatch+1)
	if _, err := client.BatchGet(context.Background(), ids); err == nil || calls.Load() != 0 {
		t.Fatalf("BatchGet of %d ids: %v after %d calls", len(ids), err, calls.Load())
	}
}

// ListPaid's window is closed: an order changed exactly at `to` is listed
// (the order service's listing is half-open; the client asks up to to+1µs).
// Pages follow next_cursor to the end.
func TestClient_ListPaidPagesAClosedWindow(t *testing.T) {
	t.Parallel()
	fake := testkit.NewFakeOrders(t, token)
	to := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{to.Add(-time.Hour), to.Add(-time.Minute), to, to.Add(time.Microsecond), to.Add(-2 * time.Hour)} {
		fake.Put(testkit.FakeOrder{ID: fmt.Sprint(i + 1), Status: reconcile.OrderPaid, AmountCents: 1, Currency: "CNY", UpdatedAt: at})
	}
	fake.Put(testkit.FakeOrder{ID: "9", Status: reconcile.OrderCancelled, AmountCents: 1, Currency: "CNY", UpdatedAt: to})
	c, err := orderclient.New(orderclient.Config{BaseURL: fake.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for range 10 {
		p, err := c.ListPaid(context.Background(), to.Add(-time.Hour), to, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Orders {
			got = append(got, o.ID)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("listed %v, want [1 2 3]", got)
	}
}
