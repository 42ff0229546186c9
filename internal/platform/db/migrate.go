package db

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
)

// Migration is one versioned schema change. IDs are unique across every
// package that contributes migrations to a database (prefix them with the
// package: "order_0001_orders", "lock_0001_job_fences"); they are applied in
// the order given and recorded in schema_migrations.
type Migration struct {
	ID string
	// Up applies the change. On MySQL each DDL statement commits on its own, so
	// Up should be safe to run again after a partial failure.
	Up func(tx *gorm.DB, d Dialect) error
}

// SQL is a Migration body that runs one statement list per dialect.
func SQL(mysql, sqlite []string) func(*gorm.DB, Dialect) error {
	return func(tx *gorm.DB, d Dialect) error {
		stmts := mysql
		if d == SQLite {
			stmts = sqlite
		}
		for _, s := range stmts {
			if err := tx.Exec(s).Error; err != nil {
				return err
			}
		}
		return nil
	}
}

const migrationLockTimeout = 60 * time.Second

// Migrate applies the migrations not yet recorded, once, even when several
// processes call it on the same database at the same time.
func Migrate(ctx context.Context, gdb *gorm.DB, log *slog.Logger, migs ...Migration) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	for _, m := range migs {
		if m.ID == "" || m.Up == nil || seen[m.ID] {
			return fmt.Errorf("db: migrate: empty or duplicate migration id %q", m.ID)
		}
		seen[m.ID] = true
	}
	gdb = gdb.WithContext(ctx)
	if DialectOf(gdb) == SQLite {
		// One immediate transaction holds SQLite's single writer lock for the
		// whole run: a second process waits (busy_timeout), then finds every
		// migration recorded.
		return gdb.Transaction(func(tx *gorm.DB) error { return apply(tx, SQLite, log, migs) })
	}
	release, err := mysqlLock(ctx, gdb)
	if err != nil {
		return err
	}
	defer release()
	return apply(gdb, MySQL, log, migs)
}

// mysqlLock takes a server-wide named lock for this database on a dedicated
// connection (GET_LOCK belongs to the session that took it).
func mysqlLock(ctx context.Context, gdb *gorm.DB) (func(), error) {
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("db: migrate: %w", err)
	}
	var dbName sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		conn.Close()
		return nil, fmt.Errorf("db: migrate: %w", err)
	}
	name := "onceonly_migrate:" + dbName.String
	if len(name) > 64 {
		name = name[:64]
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, int(migrationLockTimeout.Seconds())).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("db: migrate: lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		conn.Close()
		return nil, fmt.Errorf("db: migrate: lock %q not granted within %s", name, migrationLockTimeout)
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.ExecContext(rctx, "SELECT RELEASE_LOCK(?)", name)
		conn.Close()
	}, nil
}

func apply(gdb *gorm.DB, d Dialect, log *slog.Logger, migs []Migration) error {
	create := "CREATE TABLE IF NOT EXISTS schema_migrations (id VARCHAR(190) NOT NULL PRIMARY KEY, applied_at DATETIME(6) NOT NULL)"
	if d == SQLite {
		create = "CREATE TABLE IF NOT EXISTS schema_migrations (id TEXT NOT NULL PRIMARY KEY, applied_at DATETIME NOT NULL)"
	}
	if err := gdb.Exec(create).Error; err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	var ids []string
	if err := gdb.Raw("SELECT id FROM schema_migrations").Scan(&ids).Error; err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	applied := make(map[string]bool, len(ids))
	for _, id := range ids {
		applied[id] = true
	}
	for _, m := range migs {
		if applied[m.ID] {
			continue
		}
		start := time.Now()
		if err := m.Up(gdb, d); err != nil {
			return fmt.Errorf("db: migration %s: %w", m.ID, err)
		}
		if err := gdb.Exec("INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)", m.ID, Now()).Error; err != nil {
			return fmt.Errorf("db: migration %s: record: %w", m.ID, err)
		}
		log.Info("db: migration applied", "id", m.ID, "dialect", string(d), "elapsed", time.Since(start))
	}
	return nil
}
