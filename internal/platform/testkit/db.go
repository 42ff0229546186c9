package testkit

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
)

// DSN creates a fresh, empty database for the test and returns its DSN: a
// database with a random name on TEST_MYSQL_DSN (dropped when the test ends),
// or a SQLite file in the test's temporary directory.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TEST_MYSQL_DSN")
	if base == "" {
		if RequireReal() {
			t.Fatal("TEST_REQUIRE_REAL=1 but TEST_MYSQL_DSN is not set")
		}
		return "sqlite:" + filepath.Join(t.TempDir(), "test.db")
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("TEST_MYSQL_DSN: %v", err)
	}
	name := RandomName("t_")
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		admin.Close()
		t.Fatalf("create test database (is MariaDB running at TEST_MYSQL_DSN?): %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
		admin.Close()
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// DB opens a fresh database (see DSN), applies migs and closes it when the
// test ends. maxOpen caps the pool (0 = 20).
func DB(t testing.TB, maxOpen int, migs ...db.Migration) *gorm.DB {
	t.Helper()
	dsn := DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gdb, err := db.Open(ctx, dsn, db.Options{MaxOpenConns: maxOpen, Logger: Logger(t)})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	// Registered after DSN's cleanup, so it runs first: close, then drop.
	t.Cleanup(func() { _ = db.Close(gdb) })
	if err := db.Migrate(ctx, gdb, Logger(t), migs...); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return gdb
}
