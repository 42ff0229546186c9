package paymentclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/paymentclient"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

var req = order.PaymentRequest{OrderID: "7", UserID: "alice", AmountCents: 700, Currency: "CNY"}

func newClient(t *testing.T, url string, timeout time.Duration) *paymentclient.Client {
	t.Helper()
	c, err := paymentclient.New(paymentclient.Config{BaseURL: url, Token: "tok", Timeout: timeout, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClient_CreateThenGetSpeakTheContract(t *testing.T) {
	t.Parallel()
	fake := testkit.NewFakePayments(t, "tok")
	c := newClient(t, fake.URL, time.Second)
	p, created, err := c.Create(context.Background(), req)
	if err != nil || !created || p.ID == "" || p.Status != "PENDING" || p.OrderID != "7" {
		t.Fatalf("create: %+v created=%v err=%v", p, created, err)
	}
	again, created, err := c.Create(context.Background(), req)
	if err != nil || created || again != p {
		t.Fatalf("repeat: %+v created=%v err=%v, want the same payment, 200", again, created, err)
	}
	if got, err := c.Get(context.Background(), p.ID); err != nil || got != p {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := c.Get(context.Background(), "404404"); !errors.Is(err, order.ErrPaymentNotFound) {
		t.Fatalf("get unknown: %v, want ErrPaymentNotFound", err)
	}
	if _, _, err := c.Create(context.Background(), order.PaymentRequest{OrderID: "7", UserID: "alice", AmountCents: 1, Currency: "CNY"}); !errors.Is(err, order.ErrPaymentMismatch) {
		t.Fatalf("other amount: %v, want ErrPaymentMismatch", err)
	}
}

// A 4xx is an answer, not a failure: never retried. A wrong token is our
// misconfiguration, not unavailability.
func TestClient_FourHundredsAreNotRetried(t *testing.T) {
	t.Parallel()
	fake := testkit.NewFakePayments(t, "another-token")
	c := newClient(t, fake.URL, time.Second)
	_, _, err := c.Create(context.Background(), req)
	if err == nil || errors.Is(err, order.ErrPaymentsUnavailable) {
		t.Fatalf("401: %v, want a non-unavailable error", err)
	}
	if n, _ := fake.Calls(); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

// A payment service that hangs is cut off per attempt, retried, and then
// reported unavailable, well within the caller's budget.
func TestClient_HungServerIsBoundedPerAttemptAndRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	c := newClient(t, srv.URL, 100*time.Millisecond)
	start := time.Now()
	_, _, err := c.Create(context.Background(), req)
	if !errors.Is(err, order.ErrPaymentsUnavailable) {
		t.Fatalf("hung server: %v, want ErrPaymentsUnavailable", err)
	}
	if took := time.Since(start); took > 2*time.Second || calls.Load() != 3 {
		t.Fatalf("took %v with %d calls; want 3 attempts of 100 ms", took, calls.Load())
	}
}

func TestClient_UnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := newClient(t, url, time.Second)
	if _, err := c.Get(context.Background(), "1"); !errors.Is(err, order.ErrPaymentsUnavailable) {
		t.Fatalf("closed port: %v, want ErrPaymentsUnavailable", err)
	}
}

func TestNew_NamesTheVariable(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"", "payment:8081", "ftp://x", "http://"} {
		if _, err := paymentclient.New(paymentclient.Config{BaseURL: url, Token: "t"}); err == nil {
			t.Errorf("URL %q accepted", url)
		}
	}
	if _, err := paymentclient.New(paymentclient.Config{BaseURL: "http://x"}); err == nil {
		t.Error("no token accepted")
	}
}
