package lock

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/go-redsync/redsync/v4"
)

// tick is one attempt: acquire, start the watchdog, take a token, run, release.
func (r *Runner) tick(ctx context.Context, job string, fn Func) error {
	start := time.Now()
	mu := r.rs.NewMutex(r.Key(job),
		redsync.WithExpiry(r.expiry),
		redsync.WithTries(1), // never queue behind another instance
		redsync.WithTimeoutFactor(float64(r.opTimeout)/float64(r.expiry)),
		// No WithFailFast: it returns at a majority and abandons the calls
		// still in flight, which leaves stray keys behind (a release that
		// never reached a node blocks it until expiry) and extends some
		// nodes but not others. Every call is bounded by opTimeout instead.
		//
		// Never WithSetNXOnExtend: an extend must fail when the key is gone,
		// not silently re-create a lock another instance may have taken.
	)
	if err := mu.TryLockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		switch {
		case errors.As(err, &taken):
			r.m.contended.WithLabelValues(job).Inc()
			return ErrHeld
		case ctx.Err() != nil:
			return ctx.Err()
		}
		r.m.errors.WithLabelValues(job, "acquire").Inc()
		r.log.WarnContext(ctx, "lock: acquire failed; tick skipped", "job", job, "err", err)
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, job, err)
	}

	jobCtx, cancelJob := context.WithCancelCause(ctx)
	defer cancelJob(nil)
	wd := r.startWatchdog(ctx, job, mu, cancelJob)
	defer r.release(ctx, job, mu, wd)

	token, err := takeToken(jobCtx, r.db, job)
	if err == nil && jobCtx.Err() != nil {
		err = jobCtx.Err()
	}
	if err != nil {
		if cause := context.Cause(jobCtx); errors.Is(cause, ErrLockLost) {
			return cause
		}
		if ctx.Err() == nil {
			r.m.errors.WithLabelValues(job, "token").Inc()
			r.log.WarnContext(ctx, "lock: no fencing token; tick skipped", "job", job, "err", err)
		}
		return err
	}
	r.m.acquired.WithLabelValues(job).Inc()
	r.m.acquire.WithLabelValues(job).Observe(time.Since(start).Seconds())

	runStart := time.Now()
	err = call(jobCtx, fn, Fence{job: job, token: token, m: r.m})
	r.m.duration.WithLabelValues(job).Observe(time.Since(runStart).Seconds())
	lost := context.Cause(jobCtx)
	switch {
	case errors.Is(lost, ErrLockLost):
		r.m.runs.WithLabelValues(job, "lock_lost").Inc()
		if err != nil {
			return fmt.Errorf("%w: %w", lost, err)
		}
	case err != nil:
		r.m.runs.WithLabelValues(job, "error").Inc()
	default:
		r.m.runs.WithLabelValues(job, "ok").Inc()
	}
	return err
}

// call runs fn and turns a panic into an error, so that one job's bug
// releases its lock instead of taking the process down.
func call(ctx context.Context, fn Func, f Fence) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("lock: job %s panicked: %v\n%s", f.job, p, debug.Stack())
		}
	}()
	return fn(ctx, f)
}

// release stops the watchdog, then deletes the key if it is still ours, on a
// fresh bounded context (the job's may be cancelled). A failed release is
// logged, not returned: the key expires on its own.
func (r *Runner) release(ctx context.Context, job string, mu *redsync.Mutex, wd *watchdog) {
	lost := wd.stop()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opTimeout)
	defer cancel()
	ok, err := mu.UnlockContext(uctx)
	if ok || lost {
		return // after a loss the key is expected to be gone or another's
	}
	r.m.errors.WithLabelValues(job, "release").Inc()
	r.log.WarnContext(ctx, "lock: release failed; the key will expire", "job", job, "err", err)
}
