// Package closer is the order timeout closer: a fenced scheduled job
// (internal/platform/lock) that cancels the orders nobody paid within
// ORDER_PAYMENT_TIMEOUT.
//
// Each run pages through PENDING_PAYMENT orders created before now − timeout
// by keyset on (created_at, id) and cancels each with the store's CAS
// transition PENDING_PAYMENT → CANCELLED. Every page is one transaction
// through lock.Fence.Tx, whose first statement checks this run's fencing
// token under the job's fence row; the page is read inside it.
//
// # Guarantees
//
//   - One closer at a time, and a stale one is refused: two instances never
//     both cancel in one tick. If Redis lets two instances hold the lock
//     (failover, a pause past the lease), the database refuses every page of
//     the one whose token is no longer the newest (lock.ErrFenced: nothing of
//     that page is written, the run stops, onceonly_order_closer_fenced_total
//     counts it).
//   - A payment landing at the same moment wins or loses cleanly, never
//     both: the consumer's CAS PENDING_PAYMENT → PAID and this CAS
//     PENDING_PAYMENT → CANCELLED match the same row in the same state, so
//     exactly one changes it. If the payment loses, the consumer records its
//     event as late and reconciliation refunds it; if the closer loses, the
//     order is simply not on its next page.
//   - Running again is harmless: a page re-read after a crash finds only
//     orders still PENDING_PAYMENT, and the CAS refuses the rest.
//
// # Failure boundary
//
//	fault                              | effect
//	-----------------------------------+---------------------------------------------
//	Redis down / no quorum             | ticks skipped (lock metrics); no order
//	                                   | cancelled until it returns — late, not wrong
//	database down                      | the page's transaction fails; the run ends
//	                                   | and the next tick starts over
//	crash mid-page                     | the page rolls back whole; the next tick
//	                                   | cancels those orders
//	stale holder (lock lost unnoticed) | ErrFenced on its next page; it cancels nothing
//	closer vs payment on one order     | one CAS wins; a payment that lost is "late"
//
// Not guaranteed: a cancel at exactly ORDER_PAYMENT_TIMEOUT — an order is
// cancelled on the first run after it expires, up to ORDER_TIMEOUT_INTERVAL
// (±10%) later, or later still while Redis or the database is down.
package closer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/platform/lock"
	pm "github.com/onceonly/onceonly/internal/platform/metrics"
)

// Job is the closer's lock and fence name.
const Job = "order-timeout-closer"

// Config configures a Closer.
type Config struct {
	// DB is the orders database; it must also hold job_fences
	// (lock.Migrations), so the fence check and the cancels commit together.
	DB    *gorm.DB
	Store *store.Store
	// Timeout is the age at which an unpaid order is cancelled
	// (ORDER_PAYMENT_TIMEOUT).
	Timeout time.Duration
	// PageSize is the number of orders per transaction (default 100): small
	// enough to hold the rows' locks briefly.
	PageSize int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives run summaries; nil discards.
	Log *slog.Logger
	// Registerer receives onceonly_order_timed_out_total,
	// onceonly_order_closer_lost_total and onceonly_order_closer_fenced_total;
	// nil registers none.
	Registerer prometheus.Registerer
}

// Closer cancels expired orders; Run is its lock.Func.
type Closer struct {
	db       *gorm.DB
	store    *store.Store
	timeout  time.Duration
	pageSize int
	now      func() time.Time
	log      *slog.Logger
	timedOut prometheus.Counter
	lost     prometheus.Counter
	fenced   prometheus.Counter
}

// New checks cfg and returns a Closer.
func New(cfg Config) (*Closer, error) {
	if cfg.DB == nil || cfg.Store == nil {
		return nil, errors.New("closer: Config needs DB and Store")
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("config: ORDER_PAYMENT_TIMEOUT: want a positive duration, got %v", cfg.Timeout)
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &Closer{db: cfg.DB, store: cfg.Store, timeout: cfg.Timeout, pageSize: cfg.PageSize, now: cfg.Now, log: cfg.Log}
	var err error
	if c.timedOut, err = counter(cfg.Registerer, "timed_out_total", "Orders cancelled by the timeout closer."); err != nil {
		return nil, err
	}
	if c.lost, err = counter(cfg.Registerer, "closer_lost_total",
		"Expired orders the closer did not cancel because their state changed first (a payment won the race)."); err != nil {
		return nil, err
	}
	if c.fenced, err = counter(cfg.Registerer, "closer_fenced_total",
		"Closer pages refused by the fence: a newer holder of the job's lock exists."); err != nil {
		return nil, err
	}
	return c, nil
}

// Loop runs the closer under runner's lock every interval until ctx ends.
func (c *Closer) Loop(ctx context.Context, runner *lock.Runner, interval time.Duration) error {
	return runner.Run(ctx, Job, interval, c.Run)
}

// Run is one pass (a lock.Func): it cancels every order that was
// PENDING_PAYMENT and older than the timeout when the pass began, page by
// page, each page in fence.Tx. It stops at the first error; lock.ErrFenced
// (wrapped) means a newer holder exists and this instance must write no
// more.
func (c *Closer) Run(ctx context.Context, fence lock.Fence) error {
	cutoff := c.now().Add(-c.timeout)
	var after *store.CreatedKey
	total, lost := 0, 0
	for {
		page, cancelled, missed, err := c.page(ctx, fence, cutoff, after)
		if err != nil {
			return err
		}
		c.timedOut.Add(float64(cancelled))
		c.lost.Add(float64(missed))
		total, lost = total+cancelled, lost+missed
		if len(page) < c.pageSize {
			if total+lost > 0 {
				c.log.Info("timeout closer run", "cancelled", total, "lost_to_payment", lost, "cutoff", cutoff)
			}
			return nil
		}
		after = &page[len(page)-1]
	}
}

// pageAttempts bounds the tries of one page: InnoDB may pick the page's
// transaction as a deadlock victim against the consumer's (both lock order
// rows), which is worth a retry, not a wait for the next tick.
const pageAttempts = 3

// page cancels one page in one fenced transaction, and reports the page
// read, the orders cancelled and the ones whose state had changed.
func (c *Closer) page(ctx context.Context, fence lock.Fence, cutoff time.Time, after *store.CreatedKey) (page []store.CreatedKey, cancelled, missed int, err error) {
	for attempt := 1; ; attempt++ {
		err = fence.Tx(ctx, c.db, func(tx *gorm.DB) error {
			cancelled, missed = 0, 0
			st := c.store.WithTx(tx)
			var err error
			if page, err = st.PendingBefore(ctx, cutoff, after, c.pageSize); err != nil {
				return err
			}
			for _, k := range page {
				err := st.Transition(ctx, k.ID, order.PendingPayment, order.Cancelled, nil)
				switch {
				case err == nil:
					cancelled++
				case errors.Is(err, order.ErrConflict):
					missed++ // paid (or cancelled by its user) since the page was read
				default:
					return err
				}
			}
			return nil
		})
		switch {
		case err == nil:
			return page, cancelled, missed, nil
		case errors.Is(err, lock.ErrFenced):
			c.fenced.Inc()
			return nil, 0, 0, fmt.Errorf("closer: %w", err)
		case attempt == pageAttempts || ctx.Err() != nil:
			return nil, 0, 0, fmt.Errorf("closer: page after %+v: %w", after, err)
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
}

func counter(reg prometheus.Registerer, name, help string) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: pm.Namespace, Subsystem: "order", Name: name, Help: help})
	return pm.Register(reg, c)
}
