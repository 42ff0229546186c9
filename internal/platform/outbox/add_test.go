package outbox_test

import (
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/outbox"
)

func TestAdd_OutsideTransactionIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 4)
	err := outbox.Add(gdb, event("e-1", "order-1"))
	if !errors.Is(err, outbox.ErrNotInTransaction) {
		t.Fatalf("Add on a plain *gorm.DB: want ErrNotInTransaction, got %v", err)
	}
	if err := outbox.Add(nil, event("e-1", "order-1")); !errors.Is(err, outbox.ErrNotInTransaction) {
		t.Fatalf("Add on nil: want ErrNotInTransaction, got %v", err)
	}
	if n := count(t, gdb, "1=1"); n != 0 {
		t.Fatalf("%d rows written outside a transaction", n)
	}
}

func TestAdd_InsideTransactionCommitsWithIt(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 4)
	// Both ways of holding a transaction: Transaction and Begin/Commit.
	add(t, gdb, event("e-1", "order-1"))
	tx := gdb.Begin()
	if err := outbox.Add(tx, event("e-2", "order-1")); err != nil {
		t.Fatalf("Add inside Begin: %v", err)
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if n := count(t, gdb, "published_at IS NULL AND attempts = 0"); n != 2 {
		t.Fatalf("want 2 unpublished rows, got %d", n)
	}
	var headers string
	if err := gdb.Raw("SELECT headers FROM outbox_events WHERE event_id = ?", "e-1").Scan(&headers).Error; err != nil {
		t.Fatal(err)
	}
	if want := `{"event_id":"e-1","request_id":"req-e-1","type":"payment.succeeded"}`; headers != want {
		t.Fatalf("headers = %s, want %s", headers, want)
	}
}

func TestAdd_RolledBackTransactionLeavesNothing(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 4)
	boom := errors.New("business step failed")
	err := gdb.Transaction(func(tx *gorm.DB) error {
		if err := outbox.Add(tx, event("e-1", "order-1")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("want the business error, got %v", err)
	}
	if n := count(t, gdb, "1=1"); n != 0 {
		t.Fatalf("%d outbox rows survived the rollback", n)
	}
}

func TestAdd_DuplicateEventIDIsErrDuplicatedKey(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 4)
	add(t, gdb, event("e-1", "order-1"))
	err := gdb.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, event("e-1", "order-2")) })
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		t.Fatalf("duplicate event_id: want gorm.ErrDuplicatedKey, got %v", err)
	}
	// Case matters: event ids compare byte-wise on both databases.
	add(t, gdb, event("E-1", "order-1"))
	if n := count(t, gdb, "1=1"); n != 2 {
		t.Fatalf("want 2 rows, got %d", n)
	}
}

func TestAdd_InvalidMessageIsRefused(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 4)
	long := string(make([]byte, 300))
	for name, m := range map[string]outbox.Message{
		"no event id":         {Topic: topic},
		"no topic":            {EventID: "e-1"},
		"event id too long":   {EventID: long, Topic: topic},
		"key too long":        {EventID: "e-1", Topic: topic, Key: long},
		"conflicting header":  {EventID: "e-1", Topic: topic, Headers: map[string]string{"event_id": "other"}},
		"event id not UTF-8":  {EventID: "e-\xff", Topic: topic},
		"topic over 249 byte": {EventID: "e-1", Topic: long},
	} {
		err := gdb.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, m) })
		if !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("%s: want ErrInvalidMessage, got %v", name, err)
		}
	}
	if n := count(t, gdb, "1=1"); n != 0 {
		t.Fatalf("%d invalid rows written", n)
	}
}

func TestRedrive_ReopensAnExistingEventAndReportsAMissingOne(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 4)
	add(t, gdb, event("e-1", "order-1"))
	// Unpublished already: still reported as existing (MySQL counts rows
	// changed, and nothing changes here).
	if ok, err := outbox.Redrive(gdb, "e-1"); err != nil || !ok {
		t.Fatalf("Redrive of an unpublished event: ok=%v err=%v, want true", ok, err)
	}
	if err := gdb.Exec("UPDATE outbox_events SET published_at = ?, attempts = 2 WHERE event_id = ?", "2026-01-01 00:00:00", "e-1").Error; err != nil {
		t.Fatal(err)
	}
	err := gdb.Transaction(func(tx *gorm.DB) error {
		ok, err := outbox.Redrive(tx, "e-1")
		if err == nil && !ok {
			t.Error("Redrive of a published event reported false")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, gdb, "event_id = ? AND published_at IS NULL AND attempts = 0", "e-1"); n != 1 {
		t.Fatal("redriven event is not unpublished again")
	}
	if ok, err := outbox.Redrive(gdb, "e-missing"); err != nil || ok {
		t.Fatalf("Redrive of a missing event: ok=%v err=%v, want false", ok, err)
	}
}
