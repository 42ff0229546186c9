package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	goredispool "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

var (
	// ErrHeld is returned by RunOnce when another instance holds the job's
	// lock: nothing ran. (The payment service answers 409 with it.)
	ErrHeld = errors.New("lock: held by another instance")
	// ErrUnavailable is returned (wrapped, with Redis's error) when the lock
	// could not be decided: Redis unreachable or slower than its timeout, or
	// fewer than a majority of Redlock nodes answering. Nothing ran.
	ErrUnavailable = errors.New("lock: Redis unavailable or no quorum")
	// ErrLockLost is the cause (context.Cause) of a job's context cancelled by
	// the watchdog: an extend failed, was refused (the key is gone or belongs
	// to another holder) or came back too late to trust the lease. RunOnce
	// wraps it around the job's error when the job failed after the loss.
	ErrLockLost = errors.New("lock: lost")
)

// Func is a job. It runs while its instance holds the job's lock and must
// stop when ctx is done (the lock was lost: context.Cause(ctx) wraps
// ErrLockLost, or the Runner is shutting down). Every database write goes
// through fence.Tx. Its lease is extended for as long as it runs, so bound
// it with a timeout of its own.
type Func func(ctx context.Context, fence Fence) error

// Config configures a Runner.
type Config struct {
	// Addrs are the Redis addresses (host:port): one is a single node; several
	// are independent Redlock nodes (not replicas of one another) and the lock
	// needs a majority of them. Ignored when Clients is set.
	Addrs []string
	// Clients replace Addrs when a connection needs more than an address
	// (password, TLS, Sentinel). They must set ContextTimeoutEnabled, and should
	// have short dial/read/write timeouts and no retries; the caller closes them.
	Clients []*redis.Client
	// Expiry is the lease (default 10s, at least 500ms). The watchdog extends
	// it every Expiry/3 while a job runs. Each Redis call is bounded by
	// Expiry/10 (at least 200ms, at most 1s).
	Expiry time.Duration
	// DB holds job_fences (see Migrations): the database the jobs write to.
	DB *gorm.DB
	// KeyPrefix is put in front of every Redis key (default "onceonly:"); the
	// lock of job J is KeyPrefix+"lock:"+J.
	KeyPrefix string
	// Instance names this process in logs (default hostname:pid).
	Instance string
	// Logger receives lock events; nil discards them.
	Logger *slog.Logger
	// Registerer receives the onceonly_lock_* metrics; nil keeps them
	// unregistered. Several Runners may share one.
	Registerer prometheus.Registerer
}

// Runner runs jobs under a Redis lock with database fencing. It is safe for
// concurrent use; one Runner serves every job of a process.
type Runner struct {
	rs        *redsync.Redsync
	owned     []*redis.Client
	expiry    time.Duration
	opTimeout time.Duration
	db        *gorm.DB
	prefix    string
	log       *slog.Logger
	m         *metrics
}

// New checks cfg and builds a Runner. It does not contact Redis: an
// unreachable Redis fails ticks, not start-up.
func New(cfg Config) (*Runner, error) {
	if cfg.DB == nil {
		return nil, errors.New("lock: Config.DB is required")
	}
	if cfg.Expiry == 0 {
		cfg.Expiry = 10 * time.Second
	}
	if cfg.Expiry < 500*time.Millisecond {
		return nil, fmt.Errorf("lock: Config.Expiry %s is below 500ms", cfg.Expiry)
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "onceonly:"
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = host + ":" + strconv.Itoa(os.Getpid())
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{
		expiry: cfg.Expiry,
		// Every Redis call (acquire, extend, release) is bounded by this, so
		// an unreachable Redis fails a tick in well under a lease.
		opTimeout: min(max(cfg.Expiry/10, 200*time.Millisecond), time.Second),
		db:        cfg.DB,
		prefix:    cfg.KeyPrefix,
		log:       log.With("instance", cfg.Instance),
		m:         newMetrics(cfg.Registerer),
	}
	clients := cfg.Clients
	if len(clients) == 0 {
		if len(cfg.Addrs) == 0 {
			return nil, errors.New("lock: Config.Addrs or Config.Clients is required")
		}
		for _, addr := range cfg.Addrs {
			c := redis.NewClient(&redis.Options{
				Addr:        addr,
				DialTimeout: r.opTimeout, ReadTimeout: r.opTimeout, WriteTimeout: r.opTimeout,
				PoolTimeout: r.opTimeout,
				// Without it go-redis ignores context deadlines, and an extend
				// could outlive the lease it is meant to renew.
				ContextTimeoutEnabled: true,
				// One attempt per tick: a retry would only spend the lease.
				MaxRetries:    -1,
				DialerRetries: 1,
				PoolSize:      8,
			})
			r.owned = append(r.owned, c)
		}
		clients = r.owned
	}
	pools := make([]redsyncredis.Pool, 0, len(clients))
	for i, c := range clients {
		if !c.Options().ContextTimeoutEnabled {
			r.Close()
			return nil, fmt.Errorf("lock: Config.Clients[%d]: ContextTimeoutEnabled must be true, or extend deadlines are ignored", i)
		}
		pools = append(pools, goredispool.NewPool(c))
	}
	r.rs = redsync.New(pools...)
	return r, nil
}

// Close closes the Redis clients the Runner built from Config.Addrs. Call it
// after every Run has returned.
func (r *Runner) Close() error {
	var errs []error
	for _, c := range r.owned {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Key is the Redis key of job's lock.
func (r *Runner) Key(job string) string { return r.prefix + "lock:" + job }

// Run runs fn under job's lock every `every` (±10% jitter, counted from the
// end of the previous tick so slow runs never pile up), starting at once,
// until ctx is done; then it returns nil. A tick whose lock is held elsewhere
// or cannot be decided is skipped; errors are logged and counted, never
// returned. It returns an error only for an invalid job name or interval.
func (r *Runner) Run(ctx context.Context, job string, every time.Duration, fn Func) error {
	if err := checkJob(job); err != nil {
		return err
	}
	if every <= 0 {
		return fmt.Errorf("lock: Run %s: interval %s must be positive", job, every)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		err := r.tick(ctx, job, fn)
		switch {
		case err == nil, errors.Is(err, ErrHeld), ctx.Err() != nil:
		case errors.Is(err, ErrUnavailable):
			// Logged and counted where it happened.
		default:
			r.log.WarnContext(ctx, "lock: job run failed", "job", job, "err", err)
		}
		jitter := time.Duration(rand.Int64N(int64(every)/5+1)) - every/10
		timer.Reset(every + jitter)
	}
}

// RunOnce runs fn once under job's lock, without waiting for it: ErrHeld when
// another instance holds it, ErrUnavailable (wrapped) when Redis cannot
// decide, a wrapped database error when no token could be taken, an error
// wrapping ErrLockLost when the lock was lost before fn started — fn did not
// run in any of these. Otherwise it returns fn's error, wrapped with
// ErrLockLost as well when the lock was lost during the run.
func (r *Runner) RunOnce(ctx context.Context, job string, fn Func) error {
	if err := checkJob(job); err != nil {
		return err
	}
	return r.tick(ctx, job, fn)
}

func checkJob(job string) error {
	if job == "" || len(job) > maxJobName {
		return fmt.Errorf("lock: job name %q must be 1 to %d bytes", job, maxJobName)
	}
	return nil
}
