package outbox_test

import (
	"context"
	"log/slog"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
)

// The business change and its event commit in one transaction; Notify after
// the commit wakes the relay, which runs as a fenced job on every instance
// (one of them relays at a time).
func Example() {
	var (
		ctx     = context.Background()
		gdb     *gorm.DB     // the service's database, migrated with lock.Migrations() and outbox.Migrations()
		locker  *lock.Runner // lock.New(lock.Config{Addrs: ..., DB: gdb})
		brokers = []string{"127.0.0.1:9092"}
	)
	relay, err := outbox.NewRelay(outbox.RelayConfig{DB: gdb, Locker: locker, Brokers: brokers, Logger: slog.Default()})
	if err != nil {
		panic(err)
	}
	go func() { _ = relay.Run(ctx) }() // until ctx is done

	err = gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The business write: a conditional UPDATE whose rows-affected is checked.
		if res := tx.Exec("UPDATE payments SET status = 'SUCCEEDED' WHERE id = ? AND status = 'PENDING'", "p-1"); res.Error != nil || res.RowsAffected != 1 {
			return res.Error // (a real caller returns its own "not PENDING" error on 0 rows)
		}
		return outbox.Add(tx, outbox.Message{
			EventID: "evt-1",
			Topic:   "payment.events",
			Key:     "order-1",
			Payload: []byte(`{"schema_version":1,"event_id":"evt-1","type":"payment.succeeded"}`),
			Headers: map[string]string{"type": "payment.succeeded", "request_id": "req-1"},
		})
	})
	if err == nil {
		relay.Notify() // after the commit: the row is visible now
	}
}
