package app

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

	"github.com/onceonly/onceonly/internal/order/closer"
	"github.com/onceonly/onceonly/internal/order/consumer"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/lock"
)

// workersStopTimeout bounds the wait for the background work on shutdown.
// Their context is cancelled with the service's, so they stop while the
// HTTP server drains (up to service.ShutdownGrace); this is what is left of
// the 10 s a SIGTERM allows.
const workersStopTimeout = 3 * time.Second

// Background is what StartBackground runs on.
type Background struct {
	Config Config
	// DB is the orders database, migrated with Migrations (orders,
	// consumed_events, job_fences).
	DB       *gorm.DB
	Registry prometheus.Registerer
	Log      *slog.Logger
	// KeyPrefix prefixes the lock keys; "" means DefaultKeyPrefix.
	KeyPrefix string
	// Sarama, if set, replaces kafka.ConsumerConfig(consumer.Group) (tests).
	Sarama *sarama.Config
}

// StartBackground starts the order service's background work and returns at
// once:
//
//   - the payment-event consumer (group order-service on payment.events),
//     dead-lettering to payment.events.dlq through a producer made on first
//     use (Kafka may be down at start: the consumer keeps retrying to join,
//     and a poison message waits, unskipped, until the producer can be made);
//   - the timeout closer, a fenced job under LOCK_REDIS_ADDRS every
//     ORDER_TIMEOUT_INTERVAL.
//
// Both stop when ctx ends. stop waits for them (at most 3 s), then closes the
// producer and the lock's Redis clients.
func StartBackground(ctx context.Context, b Background) (stop func() error, err error) {
	if b.DB == nil {
		return nil, errors.New("order: StartBackground needs DB")
	}
	if b.Log == nil {
		b.Log = slog.New(slog.DiscardHandler)
	}
	if b.KeyPrefix == "" {
		b.KeyPrefix = DefaultKeyPrefix
	}
	if err := checkBackgroundConfig(b.Config); err != nil {
		return nil, err
	}
	st, err := store.New(b.DB, b.Registry)
	if err != nil {
		return nil, err
	}

	// The consumer.
	dlq := &lazyDLQ{brokers: b.Config.KafkaBrokers, reg: b.Registry}
	cons, err := consumer.New(consumer.Config{DB: b.DB, Store: st, DeadLetters: dlq,
		Log: b.Log.With("component", "consumer"), Registerer: b.Registry})
	if err != nil {
		return nil, err
	}
	runner, err := kafka.NewRunner(cons.RunnerConfig(b.Config.KafkaBrokers, b.Sarama, b.Log, b.Registry))
	if err != nil {
		return nil, err
	}

	// The timeout closer.
	locks, err := lock.New(lock.Config{Addrs: b.Config.LockRedisAddrs, Expiry: b.Config.LockExpiry, DB: b.DB,
		KeyPrefix: b.KeyPrefix, Logger: b.Log, Registerer: b.Registry})
	if err != nil {
		return nil, err
	}
	cl, err := closer.New(closer.Config{DB: b.DB, Store: st, Timeout: b.Config.PaymentTimeout,
		Log: b.Log.With("component", "timeout-closer"), Registerer: b.Registry})
	if err != nil {
		locks.Close()
		return nil, err
	}

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = runner.Run(wctx) }()
	go func() {
		defer wg.Done()
		if err := cl.Loop(wctx, locks, b.Config.TimeoutInterval); err != nil {
			b.Log.Error("timeout closer not started", "err", err)
		}
	}()
	return func() error {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(workersStopTimeout):
			b.Log.Warn("background work did not stop in time; closing anyway")
		}
		return errors.Join(dlq.Close(), locks.Close())
	}, nil
}

// lazyDLQ is the consumer's consumer.DeadLetterer on an idempotent producer
// made on first use and kept: a failure to make it fails that Send (the
// batch is retried, the message is never skipped), and the next Send tries
// again.
type lazyDLQ struct {
	brokers []string
	reg     prometheus.Registerer

	mu       sync.Mutex
	producer sarama.SyncProducer
	dl       *kafka.DeadLetterer
	closed   bool
}

func (l *lazyDLQ) Send(ctx context.Context, msg *sarama.ConsumerMessage, reason string) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errors.New("order: dead-letter producer closed")
	}
	if l.dl == nil {
		p, err := sarama.NewSyncProducer(l.brokers, kafka.ProducerConfig(consumer.Group+"-dlq"))
		if err != nil {
			l.mu.Unlock()
			return fmt.Errorf("order: dead-letter producer: %w", err)
		}
		l.producer, l.dl = p, kafka.NewDeadLetterer(p, events.DLQTopic, l.reg)
	}
	dl := l.dl
	l.mu.Unlock()
	return dl.Send(ctx, msg, reason)
}

func (l *lazyDLQ) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.producer == nil {
		return nil
	}
	return l.producer.Close()
}
