// Package db opens gorm on MySQL/MariaDB (production, CI) or on a SQLite file
// (the embedded demo and tests on a machine with only Go), and runs versioned
// migrations at start-up.
//
// Guarantees:
//   - A unique-index violation surfaces as gorm.ErrDuplicatedKey on both
//     dialects (gorm's TranslateError), so callers test one sentinel.
//   - Migrations are applied once, in order, each recorded in
//     schema_migrations, even when several instances start together: MySQL
//     serialises them with GET_LOCK on a dedicated connection, SQLite with one
//     immediate (writer-locking) transaction.
//   - Times are written in UTC with microsecond precision on both dialects.
//   - SQLite runs in WAL mode with a busy timeout and BEGIN IMMEDIATE
//     transactions, so concurrent writers queue instead of failing with
//     SQLITE_BUSY half-way through a transaction.
//
// Failure boundary: MySQL DDL is not transactional; a migration with several
// statements that fails half-way leaves the earlier ones applied and is not
// recorded, so the next start retries it. Write each migration so that it can
// run again (CREATE TABLE IF NOT EXISTS, one ALTER per migration).
//
// MySQL reports rows changed, not rows matched: every conditional UPDATE in
// this code base changes a column (version, counter), so RowsAffected == 1
// means "matched and applied" on both dialects.
package db
