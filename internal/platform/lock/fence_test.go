package lock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

var fenceTestTable = db.Migration{
	ID: "locktest_0001_rows",
	Up: db.SQL(
		[]string{"CREATE TABLE IF NOT EXISTS lock_test_rows (id BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL)"},
		[]string{"CREATE TABLE IF NOT EXISTS lock_test_rows (id INTEGER PRIMARY KEY AUTOINCREMENT, token INTEGER NOT NULL)"},
	),
}

func fenceDB(t *testing.T) *gorm.DB {
	t.Helper()
	return testkit.DB(t, 10, append(Migrations(), fenceTestTable)...)
}

func mustToken(t *testing.T, gdb *gorm.DB, job string) Fence {
	t.Helper()
	tok, err := takeToken(context.Background(), gdb, job)
	if err != nil {
		t.Fatal(err)
	}
	return Fence{job: job, token: tok}
}

func insertRow(f Fence) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error {
		return tx.Exec("INSERT INTO lock_test_rows (token) VALUES (?)", f.token).Error
	}
}

func rows(t *testing.T, gdb *gorm.DB, token int64) int64 {
	t.Helper()
	var n int64
	if err := gdb.Raw("SELECT COUNT(*) FROM lock_test_rows WHERE token = ?", token).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFence_StaleTokenIsRefusedAsSoonAsANewerOneIsIssued(t *testing.T) {
	t.Parallel()
	gdb := fenceDB(t)
	old := mustToken(t, gdb, "job")
	newer := mustToken(t, gdb, "job") // the newer holder has not written anything
	if old.token != 1 || newer.token != 2 {
		t.Fatalf("tokens %d, %d; want 1, 2", old.token, newer.token)
	}
	called := false
	err := old.Tx(context.Background(), gdb, func(tx *gorm.DB) error { called = true; return insertRow(old)(tx) })
	if !errors.Is(err, ErrFenced) || called {
		t.Fatalf("stale Tx: err %v, fn called %v; want ErrFenced before fn", err, called)
	}
	if err := newer.Tx(context.Background(), gdb, insertRow(newer)); err != nil {
		t.Fatalf("newest Tx: %v", err)
	}
	if rows(t, gdb, old.token) != 0 || rows(t, gdb, newer.token) != 1 {
		t.Fatal("want 0 rows from the stale token and 1 from the newest")
	}
	// Tokens are per job: another job's acquisition fences nothing here.
	if other := mustToken(t, gdb, "other-job"); other.token != 1 {
		t.Fatalf("another job's first token is %d, want 1", other.token)
	}
	if err := newer.Tx(context.Background(), gdb, insertRow(newer)); err != nil {
		t.Fatalf("newest Tx after another job acquired: %v", err)
	}
}

// MySQL counts rows changed, not matched: a check that wrote the same value
// again would report 0 rows on the second call within the same token.
func TestFence_RepeatedChecksWithTheCurrentTokenAllPass(t *testing.T) {
	t.Parallel()
	gdb := fenceDB(t)
	f := mustToken(t, gdb, "job")
	for i := range 5 {
		if err := f.Tx(context.Background(), gdb, func(*gorm.DB) error { return nil }); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
}

func TestFence_FailedFnRollsBackItsWrites(t *testing.T) {
	t.Parallel()
	gdb := fenceDB(t)
	f := mustToken(t, gdb, "job")
	boom := errors.New("boom")
	err := f.Tx(context.Background(), gdb, func(tx *gorm.DB) error {
		if err := insertRow(f)(tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || rows(t, gdb, f.token) != 0 {
		t.Fatalf("err %v, rows %d; want boom and no row", err, rows(t, gdb, f.token))
	}
}

// A fenced transaction holds the fence row, so a newer holder's token waits
// for it: the transaction commits before the newer token exists, and the
// holder's next transaction is refused.
func TestFence_TxInProgressCommitsBeforeTheNewerTokenIsIssued(t *testing.T) {
	t.Parallel()
	gdb := fenceDB(t)
	a := mustToken(t, gdb, "job")
	type result struct {
		token int64
		err   error
	}
	newer := make(chan result, 1)
	err := a.Tx(context.Background(), gdb, func(tx *gorm.DB) error {
		go func() {
			tok, err := takeToken(context.Background(), gdb, "job")
			newer <- result{tok, err}
		}()
		// The new holder must not get its token while this transaction is
		// open; waiting cannot make a correct fence fail.
		select {
		case r := <-newer:
			return errors.New("a newer token was issued inside a fenced transaction: " + errString(r.err))
		case <-time.After(300 * time.Millisecond):
		}
		return insertRow(a)(tx)
	})
	if err != nil {
		t.Fatalf("A's Tx: %v", err)
	}
	r := recv(t, newer, 15*time.Second)
	if r.err != nil || r.token != a.token+1 {
		t.Fatalf("newer token: %d, %v; want %d", r.token, r.err, a.token+1)
	}
	if rows(t, gdb, a.token) != 1 {
		t.Fatal("A's committed write is missing")
	}
	if err := a.Tx(context.Background(), gdb, insertRow(a)); !errors.Is(err, ErrFenced) {
		t.Fatalf("A's next Tx: %v, want ErrFenced", err)
	}
}

func TestFence_ConcurrentAcquisitionsGetDistinctIncreasingTokens(t *testing.T) {
	t.Parallel()
	gdb := fenceDB(t)
	const workers, each = 8, 10
	var (
		mu     sync.Mutex
		tokens []int64
		wg     sync.WaitGroup
	)
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				tok, err := takeToken(context.Background(), gdb, "job")
				if err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				tokens = append(tokens, tok)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	slices.Sort(tokens)
	for i, tok := range tokens {
		if tok != int64(i+1) {
			t.Fatalf("tokens %v: want exactly 1..%d", tokens, workers*each)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s", timeout)
		panic("unreachable")
	}
}
