package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/onceonly/onceonly/internal/order/app"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

type payJSON struct {
	PaymentID   string `json:"payment_id"`
	OrderID     string `json:"order_id"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// newPayEnv is the order service wired to a fake payment service through
// the real HTTP client (app.Mount builds it from PAYMENT_SERVICE_URL).
func newPayEnv(t *testing.T, mod ...func(*app.Config)) (*env, *testkit.FakePayments) {
	t.Helper()
	fake := testkit.NewFakePayments(t, internalToken)
	e := newEnv(t, options{cfg: func(c *app.Config) {
		c.PaymentServiceURL = fake.URL
		for _, m := range mod {
			m(c)
		}
	}})
	return e, fake
}

func (e *env) pay(user, id, body string, headers ...string) resp {
	return e.do(http.MethodPost, "/v1/orders/"+id+"/pay", user, body, headers...)
}

func decodePay(t testing.TB, r resp) payJSON {
	t.Helper()
	var p payJSON
	mustJSON(t, r.body, &p)
	return p
}

func (e *env) order(user, id string) orderJSON {
	e.t.Helper()
	return decodeOrder(e.t, e.do(http.MethodGet, "/v1/orders/"+id, user, ""))
}

func TestPay_CreatesOnceThenReturnsTheSamePayment(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)

	first := e.pay("alice", o.ID, "")
	if first.status != http.StatusCreated {
		t.Fatalf("first pay: %v", first)
	}
	p := decodePay(t, first)
	if p.PaymentID == "" || p.OrderID != o.ID || p.Status != "PENDING" || p.AmountCents != 700 || p.Currency != "CNY" {
		t.Fatalf("first pay answered %+v", p)
	}
	got := e.order("alice", o.ID)
	if got.Status != "PENDING_PAYMENT" || got.PaymentID == nil || *got.PaymentID != p.PaymentID || got.Version != o.Version+1 {
		t.Fatalf("after pay the order is %+v, want PENDING_PAYMENT with payment %s at version %d", got, p.PaymentID, o.Version+1)
	}
	// Again, with {} this time: the same payment, 200, and the order row
	// is not written again (version unchanged).
	again := e.pay("alice", o.ID, "{}")
	if again.status != http.StatusOK || decodePay(t, again) != p {
		t.Fatalf("second pay: %v, want 200 %+v", again, p)
	}
	if v := e.order("alice", o.ID).Version; v != o.Version+1 {
		t.Fatalf("a repeated pay moved the version to %d", v)
	}
	if n := len(fake.Attempts(o.ID)); n != 1 {
		t.Fatalf("%d payment attempts, want 1", n)
	}
}

func TestPay_Contract(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	bobs := e.create("bob", body1)
	cases := []struct {
		name, user, id, body string
		status               int
		code                 string
	}{
		{"another user's order is not found", "alice", bobs.ID, "", 404, "not_found"},
		{"unparsable id is not found", "alice", "abc", "", 404, "not_found"},
		{"non-canonical id is not found", "alice", "0" + o.ID, "", 404, "not_found"},
		{"unknown id is not found", "alice", "999999999", "", 404, "not_found"},
		{"a body with fields is refused", "alice", o.ID, `{"amount_cents":1}`, 400, "invalid_json"},
		{"no user is 401", "", o.ID, "", 401, "unauthenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, e.pay(tc.user, tc.id, tc.body), tc.status, tc.code)
		})
	}
	if c, g := fake.Calls(); c+g != 0 {
		t.Fatalf("refused requests reached the payment service: %d creates, %d gets", c, g)
	}
}

func TestPay_CancelledOrderIs409AndAsksNothing(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	if r := e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", "alice", ""); r.status != http.StatusOK {
		t.Fatalf("cancel: %v", r)
	}
	mustProblem(t, e.pay("alice", o.ID, ""), http.StatusConflict, "invalid_transition")
	if c, g := fake.Calls(); c+g != 0 {
		t.Fatalf("pay on a cancelled order called the payment service (%d creates, %d gets)", c, g)
	}
}

func TestPay_PaidOrderReturnsItsSucceededPayment(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	id := fake.Add(testkit.FakePayment{OrderID: o.ID, UserID: "alice", Status: "SUCCEEDED", AmountCents: 700, Currency: "CNY"})
	e.markPaid(o.ID, id)
	r := e.pay("alice", o.ID, "")
	if r.status != http.StatusOK {
		t.Fatalf("pay on a PAID order: %v", r)
	}
	if p := decodePay(t, r); p.PaymentID != id || p.Status != "SUCCEEDED" || p.OrderID != o.ID {
		t.Fatalf("pay on a PAID order answered %+v, want payment %s SUCCEEDED", p, id)
	}
	if c, _ := fake.Calls(); c != 0 {
		t.Fatalf("pay on a PAID order asked for a payment %d times", c)
	}
}

func TestPay_AfterAFailedAttemptMakesTheNextOne(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	first := decodePay(t, e.pay("alice", o.ID, ""))
	fake.SetStatus(first.PaymentID, "FAILED")
	r := e.pay("alice", o.ID, "")
	if r.status != http.StatusCreated {
		t.Fatalf("pay after FAILED: %v, want 201", r)
	}
	second := decodePay(t, r)
	if second.PaymentID == first.PaymentID || second.Status != "PENDING" {
		t.Fatalf("pay after FAILED answered %+v (first %+v)", second, first)
	}
	if got := e.order("alice", o.ID); *got.PaymentID != second.PaymentID || got.Version != o.Version+2 {
		t.Fatalf("order %+v, want payment %s at version %d", got, second.PaymentID, o.Version+2)
	}
}

func TestPay_LivePaymentWithAnotherAmountIs409PaymentMismatch(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	fake.Add(testkit.FakePayment{OrderID: o.ID, UserID: "alice", Status: "PENDING", AmountCents: 699, Currency: "CNY"})
	mustProblem(t, e.pay("alice", o.ID, ""), http.StatusConflict, "payment_mismatch")
	if got := e.order("alice", o.ID); got.PaymentID != nil || got.Version != o.Version {
		t.Fatalf("a refused pay changed the order: %+v", got)
	}
}

func TestPay_RefundedPaymentIs409InvalidTransition(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	fake.Add(testkit.FakePayment{OrderID: o.ID, UserID: "alice", Status: "REFUNDED", AmountCents: 700, Currency: "CNY"})
	mustProblem(t, e.pay("alice", o.ID, ""), http.StatusConflict, "invalid_transition")
}

// The payment service fails twice (503) and then answers: the client's
// retries hide it, and the caller's request id travels with every attempt.
func TestPay_RetriesPaymentServiceFailuresWithTheSameRequestID(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	fake.FailNext(2)
	r := e.pay("alice", o.ID, "", "X-Request-ID", "trace-pay-1")
	if r.status != http.StatusCreated {
		t.Fatalf("pay through two failures: %v", r)
	}
	if c, _ := fake.Calls(); c != 3 {
		t.Fatalf("%d create calls, want 3 (two failures, one success)", c)
	}
	for i, id := range fake.RequestIDs() {
		if id != "trace-pay-1" {
			t.Fatalf("call %d carried X-Request-ID %q, want trace-pay-1", i, id)
		}
	}
	if n := len(fake.Attempts(o.ID)); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

func TestPay_PaymentServiceDownIs503AndTheOrderIsUnchanged(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	fake.FailNext(100)
	mustProblem(t, e.pay("alice", o.ID, ""), http.StatusServiceUnavailable, "dependency_unavailable")
	if c, _ := fake.Calls(); c != 3 {
		t.Fatalf("%d create calls, want 3 attempts", c)
	}
	if got := e.order("alice", o.ID); got.PaymentID != nil || got.Version != o.Version {
		t.Fatalf("a failed pay changed the order: %+v", got)
	}

	// Nobody listening at all: the same answer.
	down := newEnv(t, options{})
	o = down.create("alice", body1)
	mustProblem(t, down.pay("alice", o.ID, ""), http.StatusServiceUnavailable, "dependency_unavailable")
}

// The order leaves PENDING_PAYMENT while the payment service answers: the
// attach matches no row and /pay answers for the order's new state.
func TestPay_OrderChangingStateMeanwhileIsAnsweredForItsNewState(t *testing.T) {
	t.Parallel()
	t.Run("cancelled meanwhile: 409", func(t *testing.T) {
		t.Parallel()
		e, fake := newPayEnv(t)
		o := e.create("alice", body1)
		fake.OnCreate(func(string) {
			if r := e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", "alice", ""); r.status != http.StatusOK {
				t.Errorf("cancel: %v", r)
			}
		})
		mustProblem(t, e.pay("alice", o.ID, ""), http.StatusConflict, "invalid_transition")
		if got := e.order("alice", o.ID); got.Status != "CANCELLED" || got.PaymentID != nil {
			t.Fatalf("order %+v", got)
		}
	})
	t.Run("paid meanwhile: 200 with the succeeded payment", func(t *testing.T) {
		t.Parallel()
		e, fake := newPayEnv(t)
		o := e.create("alice", body1)
		fake.OnCreate(func(string) {
			p := fake.Attempts(o.ID)[0]
			fake.SetStatus(p.ID, "SUCCEEDED")
			e.markPaid(o.ID, p.ID)
		})
		r := e.pay("alice", o.ID, "")
		if p := decodePay(t, r); r.status != http.StatusOK || p.Status != "SUCCEEDED" {
			t.Fatalf("pay: %v", r)
		}
	})
}

// 50 concurrent /pay of one order: one payment attempt, every answer names it.
func TestPay_ConcurrentPaysYieldOnePayment(t *testing.T) {
	t.Parallel()
	e, fake := newPayEnv(t)
	o := e.create("alice", body1)
	const n = 50
	res := make([]resp, n)
	race(n, func(i int) { res[i] = e.pay("alice", o.ID, "") })
	created, ids := 0, map[string]bool{}
	for _, r := range res {
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("unexpected answer %v", r)
		}
		ids[decodePay(t, r).PaymentID] = true
	}
	if created != 1 || len(ids) != 1 || len(fake.Attempts(o.ID)) != 1 {
		t.Fatalf("%d answers 201, %d payment ids, %d attempts; want 1 each", created, len(ids), len(fake.Attempts(o.ID)))
	}
	if got := e.order("alice", o.ID); got.Version != o.Version+1 {
		t.Fatalf("version %d after 50 pays of one payment, want %d", got.Version, o.Version+1)
	}
}

// markPaid moves an order to PAID as the consumer would.
func (e *env) markPaid(id, paymentID string) {
	e.t.Helper()
	res := e.db.Exec("UPDATE orders SET status = 'PAID', payment_id = ?, version = version + 1 WHERE id = ? AND status = 'PENDING_PAYMENT'", paymentID, id)
	if res.Error != nil || res.RowsAffected != 1 {
		e.t.Fatalf("mark order %s paid: %v (%d rows)", id, res.Error, res.RowsAffected)
	}
}
