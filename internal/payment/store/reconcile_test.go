package store_test

import (
	"context"
	"testing"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/payment/store"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// A transition keeps the id of its event on the payment: what
// reconciliation re-drives, or rebuilds if the outbox row was pruned.
func TestTransition_KeepsTheEventIDOfTheCurrentStatus(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	p := newPayment(t, s, "o-1", 1)
	if err := s.Transition(ctx, p.ID, payment.Pending, payment.Succeeded, payment.Change{Event: event(p, events.TypeSucceeded, "ev-ok")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, p.ID); got.EventID != "ev-ok" {
		t.Fatalf("event id %q after SUCCEEDED, want ev-ok", got.EventID)
	}
	if err := s.Transition(ctx, p.ID, payment.Succeeded, payment.Refunded, payment.Change{RefundKey: "rk",
		Event: event(p, events.TypeRefunded, "ev-refund")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, p.ID); got.EventID != "ev-refund" {
		t.Fatalf("event id %q after REFUNDED, want ev-refund", got.EventID)
	}
}

// payments.event_id is added to a database made before it, and adding it
// again (a migration interrupted after its DDL, re-run) is harmless.
func TestMigrations_EventIDColumnIsAddedOnceToAnOlderSchema(t *testing.T) {
	t.Parallel()
	all := store.Migrations()
	gdb := testkit.DB(t, 4, all[:2]...) // the schema before event ids
	ctx := context.Background()
	if err := db.Migrate(ctx, gdb, nil, all...); err != nil {
		t.Fatalf("migrate an older schema: %v", err)
	}
	if err := gdb.Exec("DELETE FROM schema_migrations WHERE id = ?", all[2].ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx, gdb, nil, all...); err != nil {
		t.Fatalf("re-run the event_id migration: %v", err)
	}
	if err := gdb.Exec("UPDATE payments SET event_id = 'x' WHERE 1 = 0").Error; err != nil {
		t.Fatalf("no event_id column: %v", err)
	}
}
