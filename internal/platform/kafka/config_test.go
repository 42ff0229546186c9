package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestProducerConfig_IsIdempotentAcksAllOneInFlightHashPartitioned(t *testing.T) {
	t.Parallel()
	c := kafka.ProducerConfig("relay")
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if !c.Producer.Idempotent || c.Producer.RequiredAcks != sarama.WaitForAll || c.Net.MaxOpenRequests != 1 {
		t.Errorf("idempotent=%v acks=%v maxOpen=%d, want true, WaitForAll, 1",
			c.Producer.Idempotent, c.Producer.RequiredAcks, c.Net.MaxOpenRequests)
	}
	if c.Producer.Retry.Max < 1 || !c.Producer.Return.Successes || !c.Producer.Return.Errors {
		t.Errorf("retries=%d successes=%v errors=%v", c.Producer.Retry.Max, c.Producer.Return.Successes, c.Producer.Return.Errors)
	}
	if d := c.Producer.Retry.BackoffFunc(20, 10); d > 2*time.Second {
		t.Errorf("retry backoff uncapped: %v", d)
	}
	if c.Net.ReadTimeout <= c.Producer.Timeout {
		t.Errorf("read timeout %v must exceed the acks wait %v", c.Net.ReadTimeout, c.Producer.Timeout)
	}
}

func TestConsumerConfig_CommitsManuallyFromOldestWithKfakeSessionTimeout(t *testing.T) {
	t.Parallel()
	c := kafka.ConsumerConfig("order")
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Consumer.Offsets.AutoCommit.Enable || c.Consumer.Offsets.Initial != sarama.OffsetOldest || !c.Consumer.Return.Errors {
		t.Errorf("autocommit=%v initial=%d errors=%v", c.Consumer.Offsets.AutoCommit.Enable, c.Consumer.Offsets.Initial, c.Consumer.Return.Errors)
	}
	g := c.Consumer.Group
	if g.Session.Timeout != 6*time.Second || g.Heartbeat.Interval != 2*time.Second {
		t.Errorf("session %v heartbeat %v, want 6s 2s", g.Session.Timeout, g.Heartbeat.Interval)
	}
	if c.Net.ReadTimeout <= g.Rebalance.Timeout {
		t.Errorf("read timeout %v must exceed the rebalance timeout %v (JoinGroup waits that long)", c.Net.ReadTimeout, g.Rebalance.Timeout)
	}
}

func TestNewRunner_RefusesIncompleteConfigAndCooperativeRebalancing(t *testing.T) {
	t.Parallel()
	ok := kafka.RunnerConfig{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"},
		Handler: func(_ context.Context, _ []*sarama.ConsumerMessage) error { return nil }}
	coop := kafka.ConsumerConfig("g")
	coop.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	mixed := kafka.ConsumerConfig("g")
	mixed.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky(), sarama.NewBalanceStrategyRange()}
	cases := []struct {
		name    string
		edit    func(*kafka.RunnerConfig)
		wantErr bool
	}{
		{"complete", func(*kafka.RunnerConfig) {}, false},
		{"no brokers", func(c *kafka.RunnerConfig) { c.Brokers = nil }, true},
		{"no group", func(c *kafka.RunnerConfig) { c.Group = "" }, true},
		{"no topics", func(c *kafka.RunnerConfig) { c.Topics = nil }, true},
		{"no handler", func(c *kafka.RunnerConfig) { c.Handler = nil }, true},
		{"cooperative", func(c *kafka.RunnerConfig) { c.Config = coop }, true},
		{"eager and cooperative mixed (eager wins)", func(c *kafka.RunnerConfig) { c.Config = mixed }, false},
	}
	for _, tc := range cases {
		cfg := ok
		tc.edit(&cfg)
		if _, err := kafka.NewRunner(cfg); (err != nil) != tc.wantErr {
			t.Errorf("%s: NewRunner error = %v, want error %v", tc.name, err, tc.wantErr)
		}
	}
}

func TestRunner_RunKeepsRetryingWhileKafkaIsDownAndReturnsOnCancel(t *testing.T) {
	t.Parallel()
	r, err := kafka.NewRunner(kafka.RunnerConfig{Brokers: []string{closedAddr(t)}, Group: "g", Topics: []string{"t"},
		Handler: func(context.Context, []*sarama.ConsumerMessage) error { return nil },
		Backoff: kafka.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}, Logger: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case err := <-done:
		if ctx.Err() == nil {
			t.Fatalf("Run returned %v before its context ended; it should keep retrying", err)
		}
		if err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of its context ending")
	}
	if err := r.Run(context.Background()); err == nil {
		t.Error("second Run returned nil, want an error")
	}
}
