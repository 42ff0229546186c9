package db

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// IsRetryable reports whether err is a transaction that lost to another one
// and may simply run again: a MySQL/MariaDB deadlock (1213) or lock wait
// timeout (1205), or SQLite's busy/locked. Conditional UPDATEs make a re-run
// safe: whatever the first run would have changed, the second decides again
// from the committed state.
func IsRetryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	return err != nil && isBusy(err)
}

// maxTxAttempts bounds Transaction's re-runs: deadlocks between a handful of
// writers clear in one or two; more means something else is wrong.
const maxTxAttempts = 4

// Transaction runs fn in a transaction and runs it again (up to 4 attempts,
// with a short random pause) when the database aborted it as a deadlock
// victim or on a lock wait timeout. fn must not have effects outside tx: it
// may run more than once.
func Transaction(ctx context.Context, gdb *gorm.DB, fn func(tx *gorm.DB) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = gdb.WithContext(ctx).Transaction(fn)
		if err == nil || !IsRetryable(err) || attempt == maxTxAttempts {
			return err
		}
		pause := time.Duration(rand.Int64N(int64(5*time.Millisecond) << attempt))
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(pause):
		}
	}
}
