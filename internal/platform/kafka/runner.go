package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
)

// BatchHandler handles msgs: consecutive messages of one partition, in offset
// order, at least one. Returning nil commits them all; returning an error
// makes the Runner call it again with the same msgs after a backoff, for as
// long as it takes — so an error must mean "try again", and a message that
// can never succeed must be dealt with inside (DeadLetter, then nil).
//
// The handler runs concurrently for different partitions and must be safe
// for that. ctx ends when the Runner stops or the group rebalances; the
// handler should then give up (return an error): its msgs are not committed
// and will be delivered again, here or to another member. (If it returns nil
// anyway, the commit is attempted; after a rebalance the broker may refuse
// it, and the batch comes again all the same.) The same message
// may therefore arrive more than once: exactly-once effects need the
// handler's own dedup (consumed_events).
type BatchHandler func(ctx context.Context, msgs []*sarama.ConsumerMessage) error

// Backoff is a capped exponential delay: Initial, 2·Initial, … up to Max.
type Backoff struct {
	Initial time.Duration // default 100 ms
	Max     time.Duration // default 5 s
}

func (b Backoff) delay(attempt int) time.Duration { return capped(b.Initial, b.Max, attempt) }

// RunnerConfig configures NewRunner.
type RunnerConfig struct {
	// Brokers are the bootstrap addresses (host:port).
	Brokers []string
	// Group is the consumer group id.
	Group string
	// Topics to consume.
	Topics []string
	// Config is the sarama config; nil means ConsumerConfig(Group). It must
	// use an eager balance strategy (see NewRunner).
	Config *sarama.Config
	// Handler handles each batch; required.
	Handler BatchHandler
	// MaxBatch caps the messages per handler call (default 100).
	MaxBatch int
	// Backoff between retries of a failed batch, and between failed joins.
	Backoff Backoff
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the onceonly_kafka_* series; nil registers none.
	Registerer prometheus.Registerer
}

// Runner consumes topics as a member of a consumer group and hands batches
// to a BatchHandler, committing each batch only after the handler returned
// nil. See the package documentation for the guarantees.
type Runner struct {
	cfg     RunnerConfig
	log     *slog.Logger
	m       *runnerMetrics
	started atomic.Bool
}

// NewRunner checks cfg, fills in the defaults and returns a Runner; it does
// not connect. Its error names the missing field or the invalid sarama
// setting. It refuses a cooperative balance strategy: the retry loop stops
// on session.Context(), which a cooperative rebalance does not end for a
// revoked partition, so a failing batch could keep retrying on a partition
// another member owns.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("kafka: runner: no brokers")
	case cfg.Group == "":
		return nil, errors.New("kafka: runner: no group")
	case len(cfg.Topics) == 0:
		return nil, errors.New("kafka: runner: no topics")
	case cfg.Handler == nil:
		return nil, errors.New("kafka: runner: no handler")
	}
	if cfg.Config == nil {
		cfg.Config = ConsumerConfig(cfg.Group)
	}
	if err := cfg.Config.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: runner: %w", err)
	}
	if cooperative(cfg.Config) {
		return nil, errors.New("kafka: runner: cooperative balance strategies are not supported; use an eager one (range, roundrobin, sticky)")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 100
	}
	if cfg.Backoff.Initial <= 0 {
		cfg.Backoff.Initial = 100 * time.Millisecond
	}
	if cfg.Backoff.Max <= 0 {
		cfg.Backoff.Max = 5 * time.Second
	}
	cfg.Backoff.Max = max(cfg.Backoff.Max, cfg.Backoff.Initial)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("group", cfg.Group)
	return &Runner{cfg: cfg, log: log, m: newRunnerMetrics(cfg.Registerer)}, nil
}

// cooperative mirrors sarama's choice: the group is cooperative only when
// every configured strategy supports it.
func cooperative(c *sarama.Config) bool {
	strategies := c.Consumer.Group.Rebalance.GroupStrategies
	if c.Consumer.Group.Rebalance.Strategy != nil {
		strategies = []sarama.BalanceStrategy{c.Consumer.Group.Rebalance.Strategy}
	}
	for _, s := range strategies {
		ps, ok := s.(sarama.RebalanceProtocolBalanceStrategy)
		if !ok {
			return false
		}
		coop := false
		for _, p := range ps.SupportedProtocols() {
			coop = coop || p == sarama.RebalanceProtocolCooperative
		}
		if !coop {
			return false
		}
	}
	return len(strategies) > 0
}

// Run joins the group and consumes until ctx is done, then leaves the group
// (so its partitions move at once instead of after the session timeout) and
// returns nil. On shutdown the batch in flight either finishes and commits
// or, if it is failing, its retry loop stops without committing. Failures
// to connect or join are logged and retried with the backoff, so Run keeps a
// service's consumer alive through a Kafka outage; a connect attempt in
// progress at cancel is not interrupted (sarama takes no context) and ends
// within its dial timeouts and metadata retries. Run may be called once.
func (r *Runner) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("kafka: runner: Run called twice")
	}
	group, err := r.connect(ctx)
	if err != nil {
		return nil // ctx ended before Kafka was reachable
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		// Consume errors, failed commits and partition errors land here;
		// unread, they would block sarama once the channel buffer fills.
		for err := range group.Errors() {
			r.log.Warn("kafka consumer group error", "err", err)
		}
	}()
	h := &claimHandler{r: r}
	for attempt := 0; ctx.Err() == nil; {
		err := group.Consume(ctx, r.cfg.Topics, h)
		switch {
		case err == nil: // a session ended (rebalance or ctx): join again
			attempt = 0
		case errors.Is(err, sarama.ErrClosedConsumerGroup):
			return nil
		default:
			r.log.Warn("kafka consume failed; rejoining", "err", err, "attempt", attempt)
			sleep(ctx, r.cfg.Backoff.delay(attempt))
			attempt++
		}
	}
	if err := group.Close(); err != nil {
		r.log.Warn("kafka consumer group close", "err", err)
	}
	<-drained
	r.log.Info("kafka consumer stopped")
	return nil
}

// connect creates the consumer group, retrying until ctx is done.
func (r *Runner) connect(ctx context.Context) (sarama.ConsumerGroup, error) {
	for attempt := 0; ; attempt++ {
		g, err := sarama.NewConsumerGroup(r.cfg.Brokers, r.cfg.Group, r.cfg.Config)
		if err == nil {
			return g, nil
		}
		r.log.Warn("kafka consumer group connect failed", "err", err, "attempt", attempt)
		if !sleep(ctx, r.cfg.Backoff.delay(attempt)) {
			return nil, ctx.Err()
		}
	}
}
