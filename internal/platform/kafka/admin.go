package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// defaultCallTimeout bounds EnsureTopics and Ping when ctx has no deadline:
// sarama's calls take no context, only socket timeouts.
const defaultCallTimeout = 10 * time.Second

// TopicSpec describes a topic for EnsureTopics.
type TopicSpec struct {
	// Name of the topic.
	Name string
	// Partitions is the partition count; 0 takes the broker's default.
	Partitions int32
	// ReplicationFactor; 0 takes the broker's default (production: 3, with
	// min.insync.replicas=2 so acks=all survives one broker down).
	ReplicationFactor int16
}

// EnsureTopics creates the topics that do not exist yet. A topic that
// already exists is left as it is (its partition count is not checked or
// changed). Errors name the topic. The calls are bounded by ctx's deadline
// (or 10 s without one); sarama cannot abort a call in flight, so a cancel
// without deadline takes effect between topics.
func EnsureTopics(ctx context.Context, brokers []string, topics ...TopicSpec) error {
	if len(topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, defaultCallTimeout)
	defer cancel()
	cfg, err := boundedConfig(ctx, "onceonly-admin")
	if err != nil {
		return fmt.Errorf("kafka: ensure topics: %w", err)
	}
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return fmt.Errorf("kafka: ensure topics: %w", err)
	}
	defer admin.Close()
	for _, t := range topics {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafka: ensure topic %s: %w", t.Name, err)
		}
		detail := &sarama.TopicDetail{NumPartitions: -1, ReplicationFactor: -1}
		if t.Partitions > 0 {
			detail.NumPartitions = t.Partitions
		}
		if t.ReplicationFactor > 0 {
			detail.ReplicationFactor = t.ReplicationFactor
		}
		err := admin.CreateTopic(t.Name, detail, false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("kafka: ensure topic %s: %w", t.Name, err)
		}
	}
	return nil
}

// Ping reports whether at least one of brokers answers a real request
// (ApiVersions) within ctx's deadline (or 10 s without one): nil on the first
// answer, otherwise the errors of all brokers. It is meant for /readyz. It
// returns by the deadline, and only after every connection it opened is
// closed, so a readiness probe in a loop does not pile up sockets.
func Ping(ctx context.Context, brokers []string) error {
	if len(brokers) == 0 {
		return errors.New("kafka: ping: no brokers")
	}
	ctx, cancel := context.WithTimeout(ctx, defaultCallTimeout)
	defer cancel()
	results := make(chan error, len(brokers))
	for _, addr := range brokers {
		go func() { results <- pingBroker(ctx, addr) }()
	}
	var errs []error
	ok := false
	for range brokers {
		err := <-results
		if err == nil && !ok {
			ok = true
			cancel() // the others are no longer needed: close their sockets
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if ok {
		return nil
	}
	return fmt.Errorf("kafka: ping: no broker answered: %w", errors.Join(errs...))
}

func pingBroker(ctx context.Context, addr string) error {
	cfg, err := boundedConfig(ctx, "onceonly-ping")
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	// Open's own ApiVersions handshake swallows errors; send ours instead.
	cfg.ApiVersionsRequest = false
	d := &ctxDialer{ctx: ctx}
	cfg.Net.Proxy.Enable = true // the only hook sarama has for a dialer of ours
	cfg.Net.Proxy.Dialer = d
	stop := context.AfterFunc(ctx, d.closeConn) // a cancel unblocks a read at once
	defer stop()

	b := sarama.NewBroker(addr)
	if err := b.Open(cfg); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	defer func() { _ = b.Close() }()
	if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{Version: 0}); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("%s: %w", addr, err)
	}
	return nil
}

// boundedConfig returns a config whose socket timeouts end at ctx's deadline.
func boundedConfig(ctx context.Context, clientID string) (*sarama.Config, error) {
	deadline, _ := ctx.Deadline() // callers always set one
	left := time.Until(deadline)
	if left <= time.Millisecond || ctx.Err() != nil {
		return nil, context.DeadlineExceeded
	}
	cfg := baseConfig(clientID)
	cfg.Net.DialTimeout = min(cfg.Net.DialTimeout, left)
	cfg.Net.ReadTimeout = left
	cfg.Net.WriteTimeout = left
	cfg.Admin.Timeout = min(cfg.Admin.Timeout, left)
	cfg.Admin.Retry.Max = 2
	cfg.Metadata.Retry.Max = 1
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg, nil
}

// ctxDialer dials with ctx and can close the connection it made, which is how
// Ping aborts a request sarama would otherwise wait out.
type ctxDialer struct {
	ctx  context.Context
	mu   sync.Mutex
	conn net.Conn
}

func (d *ctxDialer) Dial(network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(d.ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conn = c
	d.mu.Unlock()
	if d.ctx.Err() != nil { // cancelled between the dial and the store
		d.closeConn()
	}
	return c, nil
}

func (d *ctxDialer) closeConn() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		_ = d.conn.Close()
	}
}
