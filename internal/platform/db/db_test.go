package db_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// testMigrations are deliberately not idempotent: a second run of
// "t_0001_items" fails (CREATE TABLE without IF NOT EXISTS), and
// "t_0002_seed" would insert a second row. So a test passes only if each
// migration ran exactly once.
var testMigrations = []db.Migration{
	{ID: "t_0001_items", Up: db.SQL(
		[]string{"CREATE TABLE items (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku VARCHAR(64) NOT NULL, created_at DATETIME(6) NOT NULL, UNIQUE KEY uq_items_sku (sku))"},
		[]string{"CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, sku TEXT NOT NULL, created_at DATETIME NOT NULL)",
			"CREATE UNIQUE INDEX uq_items_sku ON items (sku)"},
	)},
	{ID: "t_0002_seed", Up: func(tx *gorm.DB, _ db.Dialect) error {
		return tx.Exec("INSERT INTO items (sku, created_at) VALUES ('seed', ?)", db.Now()).Error
	}},
}

type item struct {
	ID        int64
	SKU       string `gorm:"column:sku"`
	CreatedAt time.Time
}

func TestMigrate_AppliesOnceAndIsIdempotentOnRestart(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 5, testMigrations...)
	ctx := context.Background()
	// A restart runs Migrate again: nothing may be applied twice.
	if err := db.Migrate(ctx, gdb, nil, testMigrations...); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	assertMigratedOnce(t, gdb)
}

func TestMigrate_RejectsDuplicateIDs(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 2)
	err := db.Migrate(context.Background(), gdb, nil, testMigrations[0], testMigrations[0])
	if err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("want a duplicate-id error, got %v", err)
	}
}

func assertMigratedOnce(t *testing.T, gdb *gorm.DB) {
	t.Helper()
	var seeds, recorded int64
	if err := gdb.Table("items").Where("sku = ?", "seed").Count(&seeds).Error; err != nil {
		t.Fatal(err)
	}
	if err := gdb.Table("schema_migrations").Count(&recorded).Error; err != nil {
		t.Fatal(err)
	}
	if seeds != 1 || recorded != int64(len(testMigrations)) {
		t.Fatalf("seed rows = %d (want 1), recorded migrations = %d (want %d)", seeds, recorded, len(testMigrations))
	}
}

func TestTranslateError_UniqueViolationIsErrDuplicatedKey(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 5, testMigrations...)
	if err := gdb.Create(&item{SKU: "a", CreatedAt: db.Now()}).Error; err != nil {
		t.Fatal(err)
	}
	err := gdb.Create(&item{SKU: "a", CreatedAt: db.Now()}).Error
	if !errors.Is(err, gorm.ErrDuplicatedKey) || !db.IsDuplicate(err) {
		t.Fatalf("duplicate insert on %s: want gorm.ErrDuplicatedKey, got %v", db.DialectOf(gdb), err)
	}
	// A wrapped error still matches: callers wrap on the way up.
	if !db.IsDuplicate(fmt.Errorf("store: %w", err)) {
		t.Fatal("wrapped duplicate not recognised")
	}
}

func TestTimes_UTCRoundTripsWithMicroseconds(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 5, testMigrations...)
	at := time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC)
	if err := gdb.Create(&item{SKU: "t", CreatedAt: at}).Error; err != nil {
		t.Fatal(err)
	}
	var got item
	if err := gdb.Where("sku = ?", "t").First(&got).Error; err != nil {
		t.Fatal(err)
	}
	// Microseconds survive (DATETIME(6)); nanoseconds are not promised.
	if got.CreatedAt.Sub(at).Abs() >= time.Microsecond || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("stored %v, read back %v (%v)", at, got.CreatedAt, got.CreatedAt.Location())
	}
}

// The helper process: when TEST_MIGRATE_DSN is set, this test binary only
// migrates that database and exits (used by the concurrent-start test).
func TestMain(m *testing.M) {
	if dsn := os.Getenv("TEST_MIGRATE_DSN"); dsn != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		gdb, err := db.Open(ctx, dsn, db.Options{MaxOpenConns: 3})
		if err == nil {
			err = db.Migrate(ctx, gdb, nil, testMigrations...)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "migrate:", err)
			os.Exit(1)
		}
		fmt.Println("migrated")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestMigrate_TwoProcessesStartingTogetherMigrateOnce(t *testing.T) {
	t.Parallel()
	dsn := testkit.DSN(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs = 3
	var wg sync.WaitGroup
	outs := make([]string, procs)
	errs := make([]error, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), "TEST_MIGRATE_DSN="+dsn)
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	for i := range procs {
		if errs[i] != nil || !strings.Contains(outs[i], "migrated") {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	gdb, err := db.Open(context.Background(), dsn, db.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(gdb)
	assertMigratedOnce(t, gdb)
}

func TestMySQLDSN_NormalisesTimesAndTimeouts(t *testing.T) {
	t.Parallel()
	got, err := db.MySQLDSN("u:p@tcp(127.0.0.1:3306)/x")
	if err != nil {
		t.Fatal(err)
	}
	// loc=UTC is the driver's default, so FormatDSN leaves it out.
	for _, want := range []string{"parseTime=true", "timeout=5s", "time_zone="} {
		if !strings.Contains(got, want) {
			t.Errorf("normalised DSN %q lacks %q", got, want)
		}
	}
	if _, err := db.MySQLDSN("not a dsn"); err == nil {
		t.Error("malformed DSN accepted")
	}
}

func TestSQLiteDSN_SetsWALBusyTimeoutAndImmediateTx(t *testing.T) {
	t.Parallel()
	got := db.SQLiteDSN("sqlite:/tmp/x.db")
	for _, want := range []string{"file:/tmp/x.db?", "journal_mode%28WAL%29", "busy_timeout%2810000%29", "_txlock=immediate"} {
		if !strings.Contains(got, want) {
			t.Errorf("SQLite DSN %q lacks %q", got, want)
		}
	}
}

// A transaction that reads, then writes while another connection commits a
// write, must wait for the writer lock (BEGIN IMMEDIATE), not fail with
// SQLITE_BUSY_SNAPSHOT as a DEFERRED one does.
func TestSQLite_TransactionsBeginImmediate(t *testing.T) {
	t.Parallel()
	gdb, err := db.Open(context.Background(), "sqlite:"+t.TempDir()+"/tx.db", db.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(gdb)
	if err := db.Migrate(context.Background(), gdb, nil, testMigrations...); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	other := make(chan error, 1)
	err = gdb.Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Table("items").Count(&n).Error; err != nil {
			return err
		}
		go func() {
			other <- gdb.Exec("INSERT INTO items (sku, created_at) VALUES ('other', ?)", db.Now()).Error
		}()
		close(read)
		time.Sleep(100 * time.Millisecond) // the other writer is now waiting, or (DEFERRED) has committed
		return tx.Exec("INSERT INTO items (sku, created_at) VALUES ('mine', ?)", db.Now()).Error
	})
	<-read
	if err != nil {
		t.Fatalf("read-then-write transaction: %v (transactions are not BEGIN IMMEDIATE)", err)
	}
	if err := <-other; err != nil {
		t.Fatalf("the other writer: %v", err)
	}
}
