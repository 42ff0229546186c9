package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestIsRetryable_DeadlockAndLockWaitOnly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1213}, true},
		{fmt.Errorf("store: %w", &mysql.MySQLError{Number: 1205}), true},
		{&mysql.MySQLError{Number: 1062}, false},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), true},
		{gorm.ErrRecordNotFound, false},
		{nil, false},
	}
	for _, tc := range cases {
		if got := db.IsRetryable(tc.err); got != tc.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Two transactions that lock two rows in opposite orders deadlock on
// MariaDB; one is the victim. Transaction must re-run the victim so both
// increments land, exactly once each.
func TestTransaction_ReRunsADeadlockVictim(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 10, testMigrations...)
	if db.DialectOf(gdb) == db.SQLite {
		t.Skip("SQLite serialises writers (BEGIN IMMEDIATE): no deadlocks to re-run")
	}
	for _, sku := range []string{"x", "y"} {
		if err := gdb.Exec("INSERT INTO items (sku, created_at) VALUES (?, ?)", sku, db.Now()).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := gdb.Exec("ALTER TABLE items ADD COLUMN n INT NOT NULL DEFAULT 0").Error; err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var runs atomic.Int64
	var firstLocked sync.WaitGroup
	firstLocked.Add(2)
	var once [2]sync.Once
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, order := range [][2]string{{"x", "y"}, {"y", "x"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.Transaction(ctx, gdb, func(tx *gorm.DB) error {
				runs.Add(1)
				if err := tx.Exec("UPDATE items SET n = n + 1 WHERE sku = ?", order[0]).Error; err != nil {
					return err
				}
				// Both hold their first row before either asks for the second.
				once[i].Do(func() { firstLocked.Done(); firstLocked.Wait() })
				return tx.Exec("UPDATE items SET n = n + 1 WHERE sku = ?", order[1]).Error
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
	var total int64
	if err := gdb.Raw("SELECT SUM(n) FROM items").Scan(&total).Error; err != nil {
		t.Fatal(err)
	}
	if total != 4 || runs.Load() < 3 {
		t.Fatalf("sum = %d (want 4: each transaction once), runs = %d (want ≥ 3: a victim re-ran)", total, runs.Load())
	}
}
