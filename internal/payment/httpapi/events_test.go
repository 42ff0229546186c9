package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment/events"
)

// 1,000 identical signed callbacks at once: one transition, one outbox row,
// exactly one payment.succeeded on the topic; every one answered 200.
func TestCallback_ThousandConcurrentIdenticalCallbacksMakeOneTransitionAndOneEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{relay: true})
	p := e.create("o-1000", 12_345, "CNY")
	body := cbBody(p, "SUCCEEDED", "txn-1000")
	headers := append(signed(currentKey, time.Now(), body), "X-Request-ID", "gw-retry-storm")

	const n = 1000
	got := make([]resp, n)
	start := time.Now()
	race(n, func(i int) { got[i] = e.do(http.MethodPost, "/v1/payments/callback", body, headers...) })
	t.Logf("%d callbacks answered in %v", n, time.Since(start).Round(time.Millisecond))
	results := map[string]int{}
	for _, r := range got {
		var res struct{ Result string }
		if r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil {
			t.Fatalf("callback answered %v", r)
		}
		results[res.Result]++
	}
	if results["processed"] != 1 || results["duplicate"] != n-1 {
		t.Fatalf("results %v, want 1 processed and %d duplicate", results, n-1)
	}
	if r := e.row(p.ID); r.Status != "SUCCEEDED" || r.Version != 2 {
		t.Fatalf("payment row %+v, want SUCCEEDED at version 2 (one transition)", r)
	}
	if rows := e.count("outbox_events", "msg_key = ?", p.OrderID); rows != 1 {
		t.Fatalf("%d outbox rows, want 1", rows)
	}
	if e.metric("onceonly_payment_callbacks_total", "result", "processed") != 1 ||
		e.metric("onceonly_payment_callbacks_total", "result", "duplicate") != n-1 {
		t.Error("callbacks_total{processed,duplicate} do not count 1 and 999")
	}

	eventually(t, 20*time.Second, "the relay to publish the event",
		func() bool { return e.count("outbox_events", "published_at IS NOT NULL") == 1 })
	var mine []published
	for _, rec := range readTopic(t, e.brokers) {
		if rec.Event.PaymentID == p.ID {
			mine = append(mine, rec)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("%d events for payment %s on %s, want exactly 1", len(mine), p.ID, events.Topic)
	}
	ev := mine[0]
	if ev.Key != p.OrderID || ev.Event.Type != events.TypeSucceeded || ev.Event.SchemaVersion != 1 ||
		ev.Event.OrderID != p.OrderID || ev.Event.AmountCents != 12_345 || ev.Event.Currency != "CNY" ||
		ev.Event.EventID == "" || ev.Event.OccurredAt.IsZero() {
		t.Fatalf("event %+v (key %q)", ev.Event, ev.Key)
	}
	if ev.Headers["event_id"] != ev.Event.EventID || ev.Headers["type"] != events.TypeSucceeded ||
		ev.Headers["request_id"] != "gw-retry-storm" {
		t.Fatalf("headers %v", ev.Headers)
	}
}

// The event is the contract: payment.failed for a FAILED callback, key =
// order id, headers event_id, type and the callback's request id.
func TestCallback_OutboxRowCarriesTheEventContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-77", 1999, "EUR")
	mustResult(t, e.callback(cbBody(p, "FAILED", "txn-declined"), "X-Request-ID", "gw-req-1"), "processed")
	var ob struct {
		EventID string
		Topic   string
		MsgKey  string
		Payload []byte
		Headers string
	}
	if err := e.db.Raw("SELECT event_id, topic, msg_key, payload, headers FROM outbox_events").Scan(&ob).Error; err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(ob.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(ob.Headers), &h); err != nil {
		t.Fatal(err)
	}
	if ob.Topic != events.Topic || ob.MsgKey != "o-77" || ev["event_id"] != ob.EventID || len(ev) != 8 ||
		ev["schema_version"] != 1.0 || ev["type"] != "payment.failed" || ev["payment_id"] != p.ID ||
		ev["order_id"] != "o-77" || ev["amount_cents"] != 1999.0 || ev["currency"] != "EUR" {
		t.Fatalf("outbox row %+v, event %v", ob, ev)
	}
	occurred, err := time.Parse(time.RFC3339Nano, ev["occurred_at"].(string))
	if got := e.get(p.ID); err != nil || got.UpdatedAt != occurred.UTC().Format(time.RFC3339Nano) {
		t.Errorf("occurred_at %v (%v), want the transition's updated_at %s", ev["occurred_at"], err, got.UpdatedAt)
	}
	if len(h) != 3 || h["event_id"] != ob.EventID || h["type"] != "payment.failed" || h["request_id"] != "gw-req-1" {
		t.Fatalf("headers %v", h)
	}
}
