package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// reconcileGrace is the tests' RECONCILE_GRACE: a payment changed within it
// is left alone, so fixtures are aged past it (age) to be reconciled.
const reconcileGrace = 30 * time.Second

// reportJSON decodes a reconciliation report.
type reportJSON struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Error       *string    `json:"error"`
	WindowStart string     `json:"window_start"`
	WindowEnd   string     `json:"window_end"`
	Checked     int64      `json:"checked"`
	Matched     int64      `json:"matched"`
	Republished int64      `json:"republished"`
	Queried     int64      `json:"queried"`
	Refunded    int64      `json:"refunded"`
	Flagged     int64      `json:"flagged"`
	Diffs       []diffJSON `json:"diffs"`
}

type diffJSON struct {
	Kind      string  `json:"kind"`
	PaymentID *string `json:"payment_id"`
	OrderID   string  `json:"order_id"`
	Action    string  `json:"action"`
}

// String is a diff as "kind payment_id order_id action" (payment_id "null"
// when absent), for comparisons.
func (d diffJSON) String() string {
	id := "null"
	if d.PaymentID != nil {
		id = *d.PaymentID
	}
	return d.Kind + " " + id + " " + d.OrderID + " " + d.Action
}

// problemCode is the code of a problem+json body ("" if none).
func problemCode(b []byte) string {
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	return p.Code
}

// counts is a report's counts as one comparable value.
type counts struct{ checked, matched, republished, queried, refunded, flagged int64 }

func (r reportJSON) counts() counts {
	return counts{r.Checked, r.Matched, r.Republished, r.Queried, r.Refunded, r.Flagged}
}

// reconEnv is a payment service with reconciliation against a fake order
// service.
func reconEnv(t *testing.T, o options) (*env, *testkit.FakeOrders) {
	t.Helper()
	fake := testkit.NewFakeOrders(t, internalToken)
	if o.ordersURL == "" {
		o.ordersURL = fake.URL
	}
	return newEnv(t, o), fake
}

// reconcile runs POST /v1/reconciliations and expects 200.
func (e *env) reconcile() reportJSON {
	e.t.Helper()
	r := e.do(http.MethodPost, "/v1/reconciliations", "", bearer...)
	if r.status != http.StatusOK {
		e.t.Fatalf("POST /v1/reconciliations: %v", r)
	}
	var rep reportJSON
	mustJSON(e.t, r.body, &rep)
	return rep
}

// latest runs GET /v1/reconciliations/latest and expects 200.
func (e *env) latest() reportJSON {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v1/reconciliations/latest", "", bearer...)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /v1/reconciliations/latest: %v", r)
	}
	var rep reportJSON
	mustJSON(e.t, r.body, &rep)
	return rep
}

// age moves payments' created_at and updated_at d into the past: as if
// they were made then, and past the grace period.
func (e *env) age(d time.Duration, ids ...string) {
	e.t.Helper()
	at := time.Now().UTC().Add(-d).Truncate(time.Microsecond)
	if err := e.db.Exec("UPDATE payments SET created_at = ?, updated_at = ? WHERE id IN ?", at, at, ids).Error; err != nil {
		e.t.Fatal(err)
	}
}

// paid creates order's payment through the API and has the gateway
// simulator deliver its success: SUCCEEDED, with its outbox row.
func (e *env) paid(order string, amount int64) paymentJSON {
	e.t.Helper()
	p := e.create(order, amount, "CNY")
	e.complete(p.ID, `{"status":"SUCCEEDED"}`)
	return e.get(p.ID)
}

// payment reads a payment as the domain sees it.
func (e *env) payment(id string) payment.Payment {
	e.t.Helper()
	p, err := e.m.Service.Get(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// fakeOrder is the fake order service's view of p's order in status.
func fakeOrder(p paymentJSON, status string, at time.Time) testkit.FakeOrder {
	return testkit.FakeOrder{ID: p.OrderID, Status: status, PaymentID: p.ID, AmountCents: p.AmountCents,
		Currency: p.Currency, UpdatedAt: at}
}

// seeded is a payment of seedPaid.
type seeded struct {
	ID, OrderID, EventID string
	AmountCents          int64
	UpdatedAt            time.Time
}

// seedPaid bulk-inserts n SUCCEEDED payments (orders "1".."n") changed
// between 20 and 10 minutes ago, each with its payment.succeeded outbox row
// marked published at once — what the relay leaves behind, or an event
// "dropped" before reaching Kafka.
func seedPaid(t *testing.T, gdb *gorm.DB, n int) []seeded {
	t.Helper()
	base := time.Now().UTC().Add(-20 * time.Minute).Truncate(time.Microsecond)
	step := 10 * time.Minute / time.Duration(n)
	out := make([]seeded, n)
	for i := range out {
		at := base.Add(time.Duration(i) * step).Truncate(time.Microsecond)
		out[i] = seeded{ID: strconv.Itoa(i + 1), OrderID: strconv.Itoa(i + 1), EventID: uuid.NewString(),
			AmountCents: int64(1000 + i), UpdatedAt: at}
	}
	testkit.BulkInsert(t, gdb, "payments", []string{"id", "order_id", "user_id", "attempt", "status", "amount_cents",
		"currency", "gateway_txn_id", "event_id", "version", "created_at", "updated_at"}, n, func(i int, row []any) {
		s := out[i]
		row[0], row[1], row[2], row[3], row[4], row[5] = s.ID, s.OrderID, "alice", 1, "SUCCEEDED", s.AmountCents
		row[6], row[7], row[8], row[9], row[10], row[11] = "CNY", "txn-"+s.ID, s.EventID, 2, s.UpdatedAt.Add(-time.Second), s.UpdatedAt
	})
	testkit.BulkInsert(t, gdb, "outbox_events", []string{"event_id", "topic", "msg_key", "payload", "headers",
		"created_at", "published_at", "attempts"}, n, func(i int, row []any) {
		s := out[i]
		id, _ := strconv.ParseInt(s.ID, 10, 64)
		ev := payment.EventOf(payment.Payment{ID: id, OrderID: s.OrderID, AmountCents: s.AmountCents, Currency: "CNY"},
			payment.Succeeded, s.UpdatedAt, s.EventID)
		payload, _ := json.Marshal(ev)
		headers, _ := json.Marshal(map[string]string{"event_id": s.EventID, "type": events.TypeSucceeded})
		row[0], row[1], row[2], row[3], row[4] = s.EventID, events.Topic, s.OrderID, payload, string(headers)
		row[5], row[6], row[7] = s.UpdatedAt, s.UpdatedAt.Add(50*time.Millisecond), 1
	})
	return out
}
