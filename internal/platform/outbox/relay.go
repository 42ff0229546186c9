package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/lock"
)

// Defaults of RelayConfig.
const (
	DefaultJob          = "outbox-relay"
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 100
	DefaultRetention    = 168 * time.Hour
	maxBatchSize        = 1000 // keeps "id IN (...)" under every driver's placeholder limit
)

// RelayConfig configures a Relay: one field per knob, zero values take the
// defaults.
type RelayConfig struct {
	// DB holds outbox_events and job_fences: the service's own database.
	// Required.
	DB *gorm.DB
	// Brokers are the Kafka bootstrap addresses. Required unless Producer is
	// set. Kafka need not be up when the relay starts.
	Brokers []string
	// Locker runs the relay as a fenced job, so one instance relays at a time
	// and a stale one cannot mark rows. Required.
	Locker *lock.Runner
	// Job is the lock's job name (default "outbox-relay"). Relays of different
	// databases that share a Redis need different names (or Locker key
	// prefixes), or one would wait for the other's lock.
	Job string
	// PollInterval is the longest wait between rounds when Notify is not
	// called (default 1s): the fallback for commits made by other processes
	// or whose Notify was lost in a crash.
	PollInterval time.Duration
	// BatchSize is the most rows one round reads and publishes (default 100,
	// at most 1000).
	BatchSize int
	// Retention keeps a published row this long after its publication, for
	// reconciliation's Redrive and for inspection (default 168h).
	Retention time.Duration
	// Backoff returns the wait after the n-th consecutive round (n >= 1) that
	// got nothing through (default 100ms doubling up to 5s).
	Backoff func(n int) time.Duration
	// Logger receives relay events; nil discards them.
	Logger *slog.Logger
	// Registerer receives the onceonly_outbox_* metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
	// Producer, when set, is used instead of a producer built from Brokers
	// with kafka.ProducerConfig (tests). The relay neither closes nor replaces
	// it, and it must preserve order per partition the way the idempotent
	// producer does.
	Producer sarama.SyncProducer
}

// Relay publishes committed outbox rows to Kafka and marks them published.
// Build it with NewRelay, start it with Run, wake it with Notify.
type Relay struct {
	cfg     RelayConfig
	log     *slog.Logger
	m       *metrics
	wake    chan struct{}
	running atomic.Bool

	// producer is the one built from Brokers; only the goroutine running the
	// job touches it (Run closes it after Locker.Run has returned).
	producer sarama.SyncProducer

	pruneEvery time.Duration
	// Test hooks (export_test.go): afterPublish runs after the broker
	// acknowledged a round's messages and before they are marked; onFenced
	// runs after a fenced transaction was refused.
	afterPublish func(eventIDs []string)
	onFenced     func()
}

// NewRelay checks cfg, fills in the defaults and registers the metrics. It
// contacts neither the database nor Kafka.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("outbox: RelayConfig.DB is required")
	case cfg.Locker == nil:
		return nil, errors.New("outbox: RelayConfig.Locker is required")
	case cfg.Producer == nil && len(cfg.Brokers) == 0:
		return nil, errors.New("outbox: RelayConfig.Brokers (or Producer) is required")
	case cfg.PollInterval < 0, cfg.BatchSize < 0, cfg.Retention < 0:
		return nil, errors.New("outbox: RelayConfig.PollInterval, BatchSize and Retention must not be negative")
	case cfg.BatchSize > maxBatchSize:
		return nil, fmt.Errorf("outbox: RelayConfig.BatchSize %d is above %d", cfg.BatchSize, maxBatchSize)
	}
	if cfg.Job == "" {
		cfg.Job = DefaultJob
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(n int) time.Duration { return capped(100*time.Millisecond, 5*time.Second, n-1) }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{
		cfg:        cfg,
		log:        log.With("job", cfg.Job),
		m:          newMetrics(cfg.Registerer, cfg.DB),
		wake:       make(chan struct{}, 1),
		pruneEvery: time.Minute,
	}, nil
}

// Notify wakes the relay for a round now instead of at the next poll. Call
// it after the transaction that called Add has committed (before the commit
// the row is invisible to the relay and the wake-up is wasted). It never
// blocks, and wake-ups coalesce: one pending wake-up covers every commit made
// before the relay's next read. It is safe for concurrent use and a no-op on
// an instance that does not hold the lock (that instance's commits are then
// found by the active relay's poll).
func (r *Relay) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx is done, then returns nil. It competes for the job's
// lock every PollInterval (at least 100ms, at most 5s); while it holds the
// lock it relays continuously, and it stops relaying as soon as the lock is
// lost (the watchdog cancels the job) or a mark is fenced, then competes
// again. Errors (database, Kafka) are logged, counted and retried, never
// returned; Run fails only when called twice at once.
//
// After ctx is done Run finishes the round in flight first, marks what the
// broker acknowledged (so a graceful shutdown leaves no duplicates behind)
// and closes the producer. A send cannot be interrupted: against an
// unreachable broker that can take sarama's retries, about 15 s; give the
// shutdown that much or accept that the batch is republished.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("outbox: Relay.Run is already running")
	}
	defer r.running.Store(false)
	defer r.closeProducer()
	every := min(max(r.cfg.PollInterval, 100*time.Millisecond), 5*time.Second)
	return r.cfg.Locker.Run(ctx, r.cfg.Job, every, r.hold)
}

// hold is the fenced job: it relays round after round while this instance
// holds the lock. It returns nil when ctx is done (lock lost or shutdown) and
// the ErrFenced error when the database refused a write.
func (r *Relay) hold(ctx context.Context, fence lock.Fence) error {
	r.log.InfoContext(ctx, "outbox: relay active", "token", fence.Token())
	defer func() {
		r.log.InfoContext(ctx, "outbox: relay inactive", "token", fence.Token(), "cause", context.Cause(ctx))
	}()
	var pending []int64 // acknowledged but not yet marked (the mark failed)
	failures := 0
	nextPrune := time.Now()
	for ctx.Err() == nil {
		if !time.Now().Before(nextPrune) {
			if err := r.prune(ctx, fence); errors.Is(err, lock.ErrFenced) {
				return err
			} else if err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "outbox: prune failed", "err", err)
			}
			nextPrune = time.Now().Add(r.pruneEvery)
		}
		res, err := r.round(ctx, fence, &pending)
		switch {
		case errors.Is(err, lock.ErrFenced):
			return err
		case ctx.Err() != nil:
			return nil
		case err != nil && res.marked == 0:
			// Nothing got through: the broker or the database is down.
			// Back off, then retry from the first unpublished row.
			failures++
			d := r.cfg.Backoff(failures)
			r.log.WarnContext(ctx, "outbox: round failed; retrying", "err", err, "failures", failures, "backoff", d)
			if !sleep(ctx, d) {
				return nil
			}
			continue
		case err != nil:
			// Some rows got through, some did not (one partition or one
			// message refused): the next round retries the failed ones at
			// once, still ahead of their keys' later events.
			r.log.WarnContext(ctx, "outbox: some events were not published; retrying", "err", err, "published", res.marked)
		}
		if failures > 0 {
			r.log.InfoContext(ctx, "outbox: relaying again", "after_failures", failures)
			failures = 0
		}
		if res.full || err != nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-time.After(r.cfg.PollInterval):
		}
	}
	return nil
}

// producerFor returns the producer, building it when there is none (Kafka
// may have been down at start, or the last one was dropped after a failure).
func (r *Relay) producerFor() (sarama.SyncProducer, error) {
	if r.cfg.Producer != nil {
		return r.cfg.Producer, nil
	}
	if r.producer == nil {
		p, err := sarama.NewSyncProducer(r.cfg.Brokers, kafka.ProducerConfig("onceonly-"+r.cfg.Job))
		if err != nil {
			return nil, fmt.Errorf("outbox: kafka producer: %w", err)
		}
		r.producer = p
	}
	return r.producer, nil
}

// dropProducer closes the built producer so the next round makes a new one:
// with a new producer id, whatever broker state the old one depended on
// (a restarted broker that forgot its sequence numbers) no longer matters.
func (r *Relay) dropProducer() {
	r.closeProducer()
}

func (r *Relay) closeProducer() {
	if r.producer != nil {
		if err := r.producer.Close(); err != nil {
			r.log.Debug("outbox: close producer", "err", err)
		}
		r.producer = nil
	}
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// capped returns initial·2^n, never more than max.
func capped(initial, max time.Duration, n int) time.Duration {
	d := initial
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
