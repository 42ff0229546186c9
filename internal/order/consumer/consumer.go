package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/kafka"
)

// Group is the order service's consumer group on events.Topic.
const Group = "order-service"

// DeadLetterer copies a message that can never be applied to the dead-letter
// topic (*kafka.DeadLetterer, on events.DLQTopic). Send returns only once the
// copy is acknowledged; it must be safe for concurrent use.
type DeadLetterer interface {
	Send(ctx context.Context, msg *sarama.ConsumerMessage, reason string) error
}

// Config configures a Consumer.
type Config struct {
	// DB is the orders database (migrated with Migrations); Store its order
	// store, whose Transition is the CAS applied inside the batch transaction.
	DB    *gorm.DB
	Store *store.Store
	// DeadLetters receives poison messages; required.
	DeadLetters DeadLetterer
	// BatchTimeout bounds one batch's database work (default 15s); a batch
	// that overruns is rolled back and retried like any failure.
	BatchTimeout time.Duration
	// Log receives poison messages and late payments; nil discards.
	Log *slog.Logger
	// Registerer receives onceonly_order_events_consumed_total{outcome};
	// nil registers none.
	Registerer prometheus.Registerer
	// BeforeCommit, if set, runs inside each batch's transaction after its
	// last statement, right before COMMIT. Tests crash the process there.
	BeforeCommit func(batch []*sarama.ConsumerMessage)
}

// Consumer applies payment events to orders exactly once; Handle is its
// kafka.BatchHandler. Safe for concurrent use (one batch per partition).
type Consumer struct {
	db      *gorm.DB
	store   *store.Store
	dlq     DeadLetterer
	timeout time.Duration
	log     *slog.Logger
	m       *metrics
	before  func([]*sarama.ConsumerMessage)

	// sent remembers the positions this process has dead-lettered whose
	// batch has not committed yet, so that retrying a batch in place (the
	// database is down) does not write another DLQ copy per attempt.
	mu   sync.Mutex
	sent map[string]bool
}

// New checks cfg and returns a Consumer.
func New(cfg Config) (*Consumer, error) {
	if cfg.DB == nil || cfg.Store == nil || cfg.DeadLetters == nil {
		return nil, errors.New("consumer: Config needs DB, Store and DeadLetters")
	}
	if cfg.BatchTimeout <= 0 {
		cfg.BatchTimeout = 15 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Consumer{db: cfg.DB, store: cfg.Store, dlq: cfg.DeadLetters, timeout: cfg.BatchTimeout,
		log: cfg.Log, m: m, before: cfg.BeforeCommit, sent: map[string]bool{}}, nil
}

// RunnerConfig is the kafka.RunnerConfig that runs c in the order-service
// group on events.Topic. cfg is the sarama consumer config (nil:
// kafka.ConsumerConfig: 6 s session, eager rebalancing, oldest offset first).
func (c *Consumer) RunnerConfig(brokers []string, cfg *sarama.Config, log *slog.Logger, reg prometheus.Registerer) kafka.RunnerConfig {
	return kafka.RunnerConfig{
		Brokers: brokers, Group: Group, Topics: []string{events.Topic}, Config: cfg,
		Handler: c.Handle, MaxBatch: 100,
		Backoff: kafka.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second},
		Logger:  log, Registerer: reg,
	}
}

// Handle applies batch (consecutive messages of one partition, in offset
// order) and returns nil once every message is done: applied or recorded in
// one committed transaction, or dead-lettered. Any error means "nothing of
// this batch is committed; call again" — the Runner retries it in place and
// never commits its offsets. In order:
//
//  1. decode and validate each message; look up the orders they name (one
//     read: orders are never deleted, and their amounts never change);
//  2. dead-letter the poison ones (undecodable, invalid, unknown order,
//     amount mismatch), each once per process;
//  3. one transaction: skip the event_ids consumed_events already has (one
//     read for the batch) or that came earlier in the batch; per remaining
//     message, apply its transition with the store's CAS and claim its
//     event_id with the outcome (a plain INSERT under the UNIQUE index: a
//     duplicate there is a racing member's, and skipped); commit.
//
// Dead letters are written before the commit, so a crash between the two
// loses nothing: the batch comes again, its good messages are applied (they
// were not committed, or are duplicates now), and the poison ones are
// copied a second time.
func (c *Consumer) Handle(ctx context.Context, batch []*sarama.ConsumerMessage) error {
	good, bad, err := c.sort(ctx, batch)
	if err != nil {
		return err
	}
	for _, b := range bad {
		if err := c.deadLetter(ctx, b.msg, b.why); err != nil {
			return err
		}
	}
	counts, err := c.apply(ctx, batch, good)
	if err != nil {
		return err
	}
	c.forget(bad)
	for outcome, n := range counts {
		c.m.consumed[outcome].Add(float64(n))
	}
	c.m.consumed[OutcomeDeadLettered].Add(float64(len(bad)))
	return nil
}

type badMessage struct {
	msg *sarama.ConsumerMessage
	why *poison
}

// sort splits batch into events to apply and poison, keeping offset order.
func (c *Consumer) sort(ctx context.Context, batch []*sarama.ConsumerMessage) ([]paymentEvent, []badMessage, error) {
	var good []paymentEvent
	var bad []badMessage
	var ids []int64
	for _, msg := range batch {
		e, why := decode(msg)
		if why != nil {
			bad = append(bad, badMessage{msg, why})
			continue
		}
		good = append(good, e)
		ids = append(ids, e.orderID)
	}
	if len(good) == 0 {
		return nil, bad, nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	found, err := c.store.GetMany(rctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("consumer: look up orders: %w", err)
	}
	byID := make(map[int64]order.Order, len(found))
	for _, o := range found {
		byID[o.ID] = o
	}
	kept := good[:0]
	for _, e := range good {
		o, ok := byID[e.orderID]
		switch {
		case !ok:
			bad = append(bad, badMessage{e.msg, poisoned(ReasonUnknownOrder, "order %s does not exist", e.OrderID)})
		case e.Type == events.TypeSucceeded && (o.AmountCents != e.AmountCents || o.Currency != e.Currency):
			bad = append(bad, badMessage{e.msg, poisoned(ReasonAmountMismatch, "payment %s paid %d %s; order %s is %d %s",
				e.PaymentID, e.AmountCents, e.Currency, e.OrderID, o.AmountCents, o.Currency)})
		default:
			kept = append(kept, e)
		}
	}
	return kept, bad, nil
}

// apply runs the batch transaction and returns the outcomes it committed.
func (c *Consumer) apply(ctx context.Context, batch []*sarama.ConsumerMessage, good []paymentEvent) (map[string]int, error) {
	if len(good) == 0 {
		return nil, nil
	}
	counts := map[string]int{}
	tctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	err := c.db.WithContext(tctx).Transaction(func(tx *gorm.DB) error {
		st := c.store.WithTx(tx)
		// How often each event occurs in the batch: its first occurrence is
		// applied and counts them all as deliveries, the later ones are
		// duplicates that cost no statement.
		times := make(map[string]int, len(good))
		var ids []string
		for _, e := range good {
			if times[e.EventID] == 0 {
				ids = append(ids, e.EventID)
			}
			times[e.EventID]++
		}
		var before map[string]int64
		if db.DialectOf(tx) == db.MySQL {
			// On SQLite a read first would make the transaction a reader
			// that cannot become the writer once another connection has
			// committed (SQLITE_BUSY_SNAPSHOT), and there are no gap locks
			// to avoid: there duplicates take the claim's path.
			var err error
			if before, err = consumedBefore(tx, ids); err != nil {
				return err
			}
		}
		for _, e := range good {
			n := times[e.EventID]
			times[e.EventID] = 0
			if n == 0 { // a later occurrence in this batch
				counts[OutcomeDuplicate]++
				continue
			}
			if row, ok := before[e.EventID]; ok { // consumed in an earlier batch
				counts[OutcomeDuplicate]++
				if err := addDeliveries(tx, row, n); err != nil {
					return err
				}
				continue
			}
			outcome, err := applyOne(tctx, tx, st, e, n)
			if err != nil {
				return err
			}
			counts[outcome]++
			if outcome == OutcomeLate {
				c.log.Warn("payment succeeded for an order that is no longer payable: recorded as late for refund",
					"event_id", e.EventID, "order_id", e.OrderID, "payment_id", e.PaymentID)
			}
		}
		if c.before != nil {
			c.before(batch)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: batch of %d at %s/%d@%d: %w",
			len(batch), batch[0].Topic, batch[0].Partition, batch[0].Offset, err)
	}
	c.m.batchSeconds.Observe(time.Since(start).Seconds())
	return counts, nil
}

// applyOne applies e inside tx and claims its event_id, returning its
// outcome. The transition's CAS runs before the claim so that the claim's
// row is written once, with the outcome; the claim still decides: if the
// event_id turns out to be consumed already (a member racing this one), the
// event is skipped — and had the CAS moved the order, the whole batch is
// refused rather than committed.
func applyOne(ctx context.Context, tx *gorm.DB, st *store.Store, e paymentEvent, deliveries int) (string, error) {
	outcome := OutcomeRecorded // payment.failed: the order stays payable; payment.refunded: never moves an order
	if e.Type == events.TypeSucceeded {
		var err error
		if outcome, err = settle(ctx, st, e); err != nil {
			return "", err
		}
	}
	fresh, err := claim(tx, e, outcome, deliveries)
	switch {
	case err != nil:
		return "", err
	case fresh:
		return outcome, nil
	case outcome == OutcomeApplied:
		// Impossible while orders never return to PENDING_PAYMENT; never
		// commit a transition for an event consumed before.
		return "", fmt.Errorf("consumer: event %s was consumed before, yet order %d was still payable", e.EventID, e.orderID)
	}
	return OutcomeDuplicate, nil
}

// settle moves e's order PENDING_PAYMENT → PAID with the store's CAS and
// says what happened: applied, or — when the CAS matched no row — late
// (CANCELLED, or PAID by another payment) or duplicate (PAID by this very
// payment: a re-driven event under a new event_id).
func settle(ctx context.Context, st *store.Store, e paymentEvent) (string, error) {
	err := st.Transition(ctx, e.orderID, order.PendingPayment, order.Paid,
		&order.Extra{Set: map[string]any{"payment_id": e.PaymentID}})
	if err == nil {
		return OutcomeApplied, nil
	}
	if !errors.Is(err, order.ErrConflict) {
		return "", err
	}
	// A locking read sees the committed state (a plain read under
	// REPEATABLE READ could show this transaction's older snapshot).
	o, err := st.GetForUpdate(ctx, e.orderID)
	if err != nil {
		return "", err // ErrNotFound included: orders are never deleted, so retry
	}
	switch {
	case o.Status == order.Paid && o.PaymentID == e.PaymentID:
		return OutcomeDuplicate, nil
	case o.Status == order.Paid, o.Status == order.Cancelled:
		return OutcomeLate, nil // the closer or the user won, or another payment did
	}
	return "", fmt.Errorf("consumer: order %d is %s after a refused PENDING_PAYMENT → PAID", o.ID, o.Status)
}
