package lock

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
)

// ErrFenced is returned by Fence.Tx when a newer holder of the job's lock has
// taken a token since this one was issued: the transaction is rolled back and
// nothing it would have written exists. The caller must stop the job (its lock
// is gone) and must not retry with the same Fence.
var ErrFenced = errors.New("lock: fenced: a newer holder has taken the job's token")

// maxJobName is the width of job_fences.job.
const maxJobName = 100

// Migrations creates job_fences, one row per job: token is the newest fencing
// token issued, checks counts fenced transactions (its increment is what makes
// the fence check a write that holds the row lock until commit, and what makes
// MySQL's rows-affected honest). Append them to the service's migrations.
func Migrations() []db.Migration {
	return []db.Migration{{
		ID: "lock_0001_job_fences",
		Up: db.SQL(
			[]string{`CREATE TABLE IF NOT EXISTS job_fences (
				job VARCHAR(100) NOT NULL PRIMARY KEY,
				token BIGINT NOT NULL,
				checks BIGINT NOT NULL DEFAULT 0,
				updated_at DATETIME(6) NOT NULL
			) ENGINE=InnoDB`},
			[]string{`CREATE TABLE IF NOT EXISTS job_fences (
				job TEXT NOT NULL PRIMARY KEY,
				token INTEGER NOT NULL,
				checks INTEGER NOT NULL DEFAULT 0,
				updated_at DATETIME NOT NULL
			)`},
		),
	}}
}

// Fence is one acquisition's fencing token for one job. It is handed to the
// job by Runner and stays valid until another holder takes a newer token;
// using it after that returns ErrFenced.
type Fence struct {
	job   string
	token int64
	m     *metrics
}

// Job is the job's name.
func (f Fence) Job() string { return f.job }

// Token is the fencing token: strictly greater than every token issued before
// for this job.
func (f Fence) Token() int64 { return f.token }

// Tx runs fn in a transaction on gdb (the database that holds job_fences) that
// commits only if f's token is still the job's newest. Its first statement
// locks the job's fence row, so a newer holder's token waits for this
// transaction to finish, and a transaction that starts after a newer token was
// issued is refused. It returns ErrFenced (wrapped; test with errors.Is) when
// refused, fn's error when fn fails (the transaction is rolled back), or a
// database error.
//
// fn may run more than once (a deadlock victim is re-run), so it must have no
// effects outside tx. Everything the job writes must go through tx. On MySQL's
// REPEATABLE READ the check runs before fn's first read, so fn's snapshot is
// taken after it.
func (f Fence) Tx(ctx context.Context, gdb *gorm.DB, fn func(tx *gorm.DB) error) error {
	if f.job == "" {
		return errors.New("lock: Tx on a zero Fence")
	}
	// db.Transaction re-runs a deadlock victim (the fence row and the job's
	// rows are locked in varying orders by concurrent writers); the check is
	// repeated with it, so a re-run is fenced like the first.
	err := db.Transaction(ctx, gdb, func(tx *gorm.DB) error {
		// Increment a counter instead of "SET token = token": MySQL counts
		// rows changed, and an UPDATE that changes nothing reports 0 rows even
		// when the token matched.
		res := tx.Exec("UPDATE job_fences SET checks = checks + 1, updated_at = ? WHERE job = ? AND token = ?",
			db.Now(), f.job, f.token)
		if res.Error != nil {
			return fmt.Errorf("lock: fence check for %s: %w", f.job, res.Error)
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("%w (job %s, token %d)", ErrFenced, f.job, f.token)
		}
		return fn(tx)
	})
	if errors.Is(err, ErrFenced) && f.m != nil {
		f.m.fenced.WithLabelValues(f.job).Inc()
	}
	return err
}

// takeToken issues the job's next fencing token: the upsert creates the row
// at 1 or increments it under the row's exclusive lock (so it waits for any
// fenced transaction in progress), and the same transaction reads it back.
// MySQL 8 and MariaDB 10.11 have no UPDATE ... RETURNING.
func takeToken(ctx context.Context, gdb *gorm.DB, job string) (int64, error) {
	upsert := "INSERT INTO job_fences (job, token, checks, updated_at) VALUES (?, 1, 0, ?) " +
		"ON DUPLICATE KEY UPDATE token = token + 1, updated_at = ?"
	if db.DialectOf(gdb) == db.SQLite {
		upsert = "INSERT INTO job_fences (job, token, checks, updated_at) VALUES (?, 1, 0, ?) " +
			"ON CONFLICT(job) DO UPDATE SET token = token + 1, updated_at = ?"
	}
	var token int64
	err := db.Transaction(ctx, gdb, func(tx *gorm.DB) error {
		now := db.Now()
		if err := tx.Exec(upsert, job, now, now).Error; err != nil {
			return err
		}
		return tx.Raw("SELECT token FROM job_fences WHERE job = ?", job).Row().Scan(&token)
	})
	if err != nil {
		return 0, fmt.Errorf("lock: take token for %s: %w", job, err)
	}
	return token, nil
}
