package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
)

// DefaultJob names the job in the lock (Redis key
// "onceonly:lock:payment-reconciliation" and its job_fences row): the
// schedule and POST /v1/reconciliations take the same lock.
const DefaultJob = "payment-reconciliation"

// Defaults of Config (DESIGN.md, "Configuration": RECONCILE_*).
const (
	DefaultWindow  = 24 * time.Hour
	DefaultGrace   = 30 * time.Second
	DefaultTimeout = 2 * time.Minute
)

// saveTimeout bounds the report's write, which runs on a context of its own
// so that a run cut off by its timeout or a lost lock is still recorded
// (the fence decides whether this holder may still write).
const saveTimeout = 5 * time.Second

// Locker runs the job under the lock with fencing (*lock.Runner).
type Locker interface {
	Run(ctx context.Context, job string, every time.Duration, fn lock.Func) error
	RunOnce(ctx context.Context, job string, fn lock.Func) error
}

// Applier applies a gateway outcome through the callback's own path
// (*payment.Service): the same CAS PENDING → SUCCEEDED|FAILED and outbox
// event as a delivered callback, so a queried outcome is applied exactly
// as the lost callback would have been.
type Applier interface {
	ApplyCallback(ctx context.Context, cb payment.Callback) (payment.Result, error)
}

// Config configures a Reconciler: one field per knob; zero durations take
// the defaults.
type Config struct {
	Store    Store
	Orders   Orders
	Gateway  payment.Gateway
	Payments Applier
	Locker   Locker
	// Job is the lock's job name (default DefaultJob).
	Job string
	// Interval is the schedule of Run (RECONCILE_INTERVAL); Run refuses 0.
	Interval time.Duration
	// Window: payments changed since now − Window are compared
	// (RECONCILE_WINDOW, default 24h).
	Window time.Duration
	// Grace: ... up to now − Grace, leaving in-flight callbacks and events
	// alone (RECONCILE_GRACE, default 30s). Must be below Window.
	Grace time.Duration
	// Timeout bounds one run (RECONCILE_TIMEOUT, default 2m); the report of
	// a run cut off by it says so.
	Timeout time.Duration
	// PageSize is the payments per page and ids per batch-get, and the
	// PAID orders per listing page (default and most MaxBatch). Memory is
	// bounded by it, not by the window.
	PageSize int
	// Notify wakes the outbox relay after a commit that added or re-drove
	// an event (outbox.Relay.Notify); nil: the relay's poll finds it.
	Notify func()
	// Now is the clock the window is measured on (nil: time.Now).
	Now func() time.Time
	// Log receives run summaries and what the report cannot carry.
	Log *slog.Logger
	// Registerer receives onceonly_reconcile_*; nil registers none.
	Registerer prometheus.Registerer
}

// Reconciler compares payments with orders and repairs what the
// asynchronous chain lost (see the package doc). Safe for concurrent use;
// the lock makes runs exclusive across instances.
type Reconciler struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	stop context.Context
	halt context.CancelFunc
	once sync.Once
}

// New checks cfg, fills in the defaults and registers the metrics.
func New(cfg Config) (*Reconciler, error) {
	switch {
	case cfg.Store == nil || cfg.Orders == nil || cfg.Gateway == nil || cfg.Payments == nil || cfg.Locker == nil:
		return nil, errors.New("reconcile: Config needs Store, Orders, Gateway, Payments and Locker")
	case cfg.Interval < 0 || cfg.Window < 0 || cfg.Grace < 0 || cfg.Timeout < 0:
		return nil, errors.New("reconcile: durations must not be negative")
	case cfg.PageSize < 0 || cfg.PageSize > MaxBatch:
		return nil, fmt.Errorf("reconcile: PageSize %d outside 1..%d", cfg.PageSize, MaxBatch)
	}
	if cfg.Job == "" {
		cfg.Job = DefaultJob
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Grace >= cfg.Window {
		return nil, fmt.Errorf("config: RECONCILE_GRACE (%s) must be below RECONCILE_WINDOW (%s)", cfg.Grace, cfg.Window)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = MaxBatch
	}
	if cfg.Notify == nil {
		cfg.Notify = func() {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{cfg: cfg, log: cfg.Log.With("job", cfg.Job), m: m}
	r.stop, r.halt = context.WithCancel(context.Background())
	return r, nil
}

// Close cancels runs started by RunNow that are still going (their reports
// are written as failed). Run stops with its own context.
func (r *Reconciler) Close() { r.once.Do(r.halt) }

// Run runs reconciliation every Interval under the job's lock until ctx is
// done, starting at once; a tick whose lock another instance holds is
// skipped, so of several instances one runs per tick. It returns nil when
// ctx is done.
func (r *Reconciler) Run(ctx context.Context) error {
	if r.cfg.Interval <= 0 {
		return errors.New("reconcile: Run needs a positive Interval (RECONCILE_INTERVAL)")
	}
	return r.cfg.Locker.Run(ctx, r.cfg.Job, r.cfg.Interval, func(ctx context.Context, f lock.Fence) error {
		// A failed run whose report is stored was logged and counted by
		// execute; only a report that could not be stored is the lock's
		// error to log.
		_, err := r.execute(ctx, f, "reconcile-"+strconv.FormatInt(f.Token(), 10))
		return err
	})
}

// RunNow runs reconciliation once, synchronously, under the same lock as
// the schedule, and returns its report — a failed run's too (Status
// Failed, Error set). The run is bounded by Timeout and does not end with
// ctx's cancellation (a client hanging up), only with its deadline or
// Close. requestID traces the events the run causes.
//
// Errors (*apperr.Error): 409 reconciliation_in_progress when another run
// holds the lock (nothing ran) or took it over during this run; 503
// dependency_unavailable when the lock cannot be decided (Redis) or the
// report could not be stored.
func (r *Reconciler) RunNow(ctx context.Context, requestID string) (Report, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(r.stop, cancel)()
	var rep Report
	ran, saved := false, false
	err := r.cfg.Locker.RunOnce(ctx, r.cfg.Job, func(ctx context.Context, f lock.Fence) error {
		ran = true
		var err error
		rep, err = r.execute(ctx, f, requestID)
		saved = err == nil
		return err
	})
	switch {
	case saved:
		return rep, nil
	case errors.Is(err, lock.ErrHeld):
		return Report{}, apperr.New(apperr.ReconciliationInProgress,
			"A reconciliation run is in progress; its report will be at GET /v1/reconciliations/latest.")
	case errors.Is(err, lock.ErrFenced):
		return Report{}, apperr.Wrap(err, apperr.ReconciliationInProgress,
			"Another instance took over reconciliation during this run; its report will be at GET /v1/reconciliations/latest.")
	case ran:
		return Report{}, apperr.Wrap(err, apperr.DependencyUnavailable,
			"The reconciliation ran but its report could not be stored; try again later.")
	default:
		return Report{}, apperr.Wrap(err, apperr.DependencyUnavailable,
			"The reconciliation lock cannot be taken now (Redis or the database is unavailable); try again later.")
	}
}

// Latest returns the newest report. Errors: 404 not_found before the first
// run; 503 when the database fails.
func (r *Reconciler) Latest(ctx context.Context) (Report, error) {
	rep, err := r.cfg.Store.LatestReport(ctx)
	switch {
	case errors.Is(err, ErrNoReport):
		return Report{}, apperr.New(apperr.NotFound, "No reconciliation has run yet.")
	case err != nil:
		return Report{}, apperr.Wrap(err, apperr.DependencyUnavailable, "The payment database is unavailable; try again later.")
	}
	return rep, nil
}

// execute is one run under the lock: compare, repair, then write the report
// through the fence. It returns the report and the error of its write.
func (r *Reconciler) execute(ctx context.Context, f lock.Fence, requestID string) (Report, error) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	rep := r.reconcile(rctx, f, requestID)
	cancel()

	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer scancel()
	rep.FinishedAt = db.Now()
	err := r.cfg.Store.SaveReport(sctx, f, &rep)
	elapsed := time.Since(start)

	status := rep.Status
	if err != nil {
		status = Failed
	}
	r.m.runs.WithLabelValues(string(status)).Inc()
	r.m.duration.Observe(elapsed.Seconds())
	args := []any{"status", rep.Status, "checked", rep.Checked, "matched", rep.Matched,
		"republished", rep.Republished, "queried", rep.Queried, "refunded", rep.Refunded, "flagged", rep.Flagged,
		"diffs", rep.DiffsTotal, "elapsed", elapsed.Round(time.Millisecond), "token", f.Token()}
	switch {
	case err != nil:
		r.log.ErrorContext(ctx, "reconcile: report not stored", append(args, "run_error", rep.Error, "err", err)...)
		return rep, fmt.Errorf("reconcile: store report: %w", err)
	case rep.Status == Failed:
		r.log.WarnContext(ctx, "reconcile: run failed", append(args, "id", rep.ID, "err", rep.Error)...)
	default:
		r.m.lastSuccess.Set(float64(rep.FinishedAt.UnixNano()) / 1e9)
		r.log.InfoContext(ctx, "reconcile: run finished", append(args, "id", rep.ID)...)
	}
	return rep, nil
}
