package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
)

// watchdog extends one acquisition's lease while its job runs, and cancels the
// job's context the moment the lease can no longer be trusted.
type watchdog struct {
	cancel context.CancelFunc
	done   chan struct{}
	lost   bool // written by the goroutine before done is closed
}

// startWatchdog starts extending mu every Expiry/3. Its context ignores the
// caller's cancellation: during a shutdown the lease is still extended until
// the job has returned, so no other instance starts while this one finishes.
func (r *Runner) startWatchdog(ctx context.Context, job string, mu *redsync.Mutex, cancelJob context.CancelCauseFunc) *watchdog {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &watchdog{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.lost = r.watch(wctx, job, mu, cancelJob)
	}()
	return w
}

// stop ends the watchdog, waits for it, and reports whether the lock was lost.
func (w *watchdog) stop() bool {
	w.cancel()
	<-w.done
	return w.lost
}

type extendResult struct {
	ok  bool
	err error
}

// watch extends until ctx is done (the job returned) and reports whether it
// gave the lock up as lost.
func (r *Runner) watch(ctx context.Context, job string, mu *redsync.Mutex, cancelJob context.CancelCauseFunc) bool {
	interval := r.expiry / 3
	// The extend must be answered this long before the lease ends: Redis's
	// clock and ours may drift, and the job needs a moment to see the cancel.
	margin := r.expiry / 10
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
		}
		deadline := mu.Until().Add(-margin)
		if !time.Now().Before(deadline) {
			// The process was paused (GC, SIGSTOP, VM) past the lease.
			return r.lose(job, cancelJob, errors.New("the watchdog woke after the lease's end"))
		}
		// ExtendContext has no deadline of its own. Each node's call gets
		// opTimeout, so one hung Redlock node costs that much and no more,
		// and never more than what is left of the lease.
		callEnd := time.Now().Add(r.opTimeout)
		if deadline.Before(callEnd) {
			callEnd = deadline
		}
		ectx, cancel := context.WithDeadline(ctx, callEnd)
		res := make(chan extendResult, 1)
		go func() {
			ok, err := mu.ExtendContext(ectx)
			res <- extendResult{ok, err}
		}()
		var out extendResult
		leaseEnd := time.NewTimer(time.Until(deadline))
		select {
		case out = <-res:
			leaseEnd.Stop()
		case <-leaseEnd.C:
			// The lease is past trusting and the extend has not answered:
			// cancel the job now, not whenever the call returns.
			r.m.extends.WithLabelValues(job, "failed").Inc()
			r.lose(job, cancelJob, errors.New("extend not answered before the lease's end"))
			<-res // ExtendContext writes mu's lease: let it finish before mu is released
			cancel()
			return true
		}
		cancel()
		if ctx.Err() != nil {
			return false // the job returned meanwhile; the release decides
		}
		var why error
		var taken *redsync.ErrTaken
		switch {
		case !out.ok && (out.err == nil || errors.As(out.err, &taken)):
			why = errors.New("extend refused: the key is gone or belongs to another holder")
		case !out.ok:
			why = fmt.Errorf("extend failed: %w", out.err)
		case !time.Now().Before(deadline):
			why = errors.New("extend answered after its deadline")
		}
		if why != nil {
			r.m.extends.WithLabelValues(job, "failed").Inc()
			return r.lose(job, cancelJob, why)
		}
		r.m.extends.WithLabelValues(job, "ok").Inc()
		timer.Reset(interval)
	}
}

// lose cancels the job with ErrLockLost as the cause, and counts it.
func (r *Runner) lose(job string, cancelJob context.CancelCauseFunc, why error) bool {
	r.m.lost.WithLabelValues(job).Inc()
	r.log.Warn("lock: lost; cancelling the job", "job", job, "why", why)
	cancelJob(fmt.Errorf("%w: %w", ErrLockLost, why))
	return true
}
