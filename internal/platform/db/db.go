package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
)

// Dialect names the SQL database behind a *gorm.DB.
type Dialect string

const (
	MySQL  Dialect = "mysql"
	SQLite Dialect = "sqlite"
)

// Options tunes the connection pool. Zero values take the defaults.
type Options struct {
	// MaxOpenConns caps connections (default 20). MariaDB's max_connections is
	// 151 by default and shared by every instance and test database.
	MaxOpenConns int
	// MaxIdleConns defaults to MaxOpenConns/2.
	MaxIdleConns int
	// ConnMaxLifetime defaults to 5 minutes.
	ConnMaxLifetime time.Duration
	// SlowQuery logs statements slower than this (default 500ms) at WARN.
	SlowQuery time.Duration
	// Logger receives slow-query and error logs; nil discards them.
	Logger *slog.Logger
}

// IsSQLite reports whether dsn names a SQLite file: "sqlite:PATH", "file:PATH",
// or a path ending in .db/.sqlite.
func IsSQLite(dsn string) bool {
	return strings.HasPrefix(dsn, "sqlite:") || strings.HasPrefix(dsn, "file:") ||
		strings.HasSuffix(dsn, ".db") || strings.HasSuffix(dsn, ".sqlite")
}

// Open connects to dsn (MySQL DSN or SQLite file, see IsSQLite), applies the
// pool limits and pings the database within ctx.
func Open(ctx context.Context, dsn string, opt Options) (*gorm.DB, error) {
	if opt.MaxOpenConns <= 0 {
		opt.MaxOpenConns = 20
	}
	if opt.MaxIdleConns <= 0 {
		opt.MaxIdleConns = max(1, opt.MaxOpenConns/2)
	}
	if opt.ConnMaxLifetime <= 0 {
		opt.ConnMaxLifetime = 5 * time.Minute
	}
	if opt.SlowQuery <= 0 {
		opt.SlowQuery = 500 * time.Millisecond
	}
	var dialector gorm.Dialector
	sqliteFile := IsSQLite(dsn)
	if sqliteFile {
		dialector = sqlite.Open(SQLiteDSN(dsn))
	} else {
		norm, err := MySQLDSN(dsn)
		if err != nil {
			return nil, err
		}
		dialector = gormmysql.Open(norm)
	}
	gcfg := &gorm.Config{
		TranslateError:         true,
		SkipDefaultTransaction: true,
		NowFunc:                Now,
		Logger:                 newGormLogger(opt.Logger, opt.SlowQuery),
	}
	gdb, err := gorm.Open(dialector, gcfg)
	// Switching a fresh SQLite file to WAL needs a moment of exclusive access
	// and answers SQLITE_BUSY without waiting when another process (a second
	// instance starting together) holds it: retry for a bounded time.
	for deadline := time.Now().Add(10 * time.Second); err != nil && sqliteFile && isBusy(err) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("db: open: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		gdb, err = gorm.Open(dialector, gcfg)
	}
	if err != nil {
		return nil, fmt.Errorf("db: open: %w", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	sqlDB.SetMaxOpenConns(opt.MaxOpenConns)
	sqlDB.SetMaxIdleConns(opt.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(opt.ConnMaxLifetime)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("db: ping: %w", err)
	}
	return gdb, nil
}

// Now is the clock every row uses: UTC, microseconds (DATETIME(6) keeps no more).
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// DialectOf tells which database gdb talks to.
func DialectOf(gdb *gorm.DB) Dialect {
	if gdb.Dialector.Name() == "sqlite" {
		return SQLite
	}
	return MySQL
}

// Close closes the pool behind gdb.
func Close(gdb *gorm.DB) error {
	sqlDB, err := gdb.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks that the database answers within ctx (readiness).
func Ping(ctx context.Context, gdb *gorm.DB) error {
	sqlDB, err := gdb.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

func isBusy(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// IsDuplicate reports whether err is a unique-index violation.
func IsDuplicate(err error) bool { return errors.Is(err, gorm.ErrDuplicatedKey) }

// MySQLDSN normalises a go-sql-driver DSN: times parsed as UTC, utf8mb4, and
// network timeouts so a dead server fails a query instead of hanging it.
func MySQLDSN(dsn string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("db: malformed MySQL DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	if cfg.Collation == "" {
		cfg.Collation = "utf8mb4_unicode_ci"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	return cfg.FormatDSN(), nil
}

// SQLiteDSN turns "sqlite:PATH" / "file:PATH" / "PATH" into a modernc DSN with
// WAL, a busy timeout, foreign keys and BEGIN IMMEDIATE transactions.
func SQLiteDSN(dsn string) string {
	path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "file:")
	query := ""
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path, query = path[:i], path[i+1:]
	}
	q, _ := url.ParseQuery(query)
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	// No _time_format: glebarez/go-sqlite (v1.21–v1.23) returns right after
	// reading it and never reads _txlock, so transactions would silently be
	// DEFERRED and a read-then-write one fails with SQLITE_BUSY_SNAPSHOT
	// instead of waiting. TestSQLite_TransactionsBeginImmediate guards this.
	q.Del("_time_format")
	return "file:" + path + "?" + q.Encode()
}
