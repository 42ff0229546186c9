package kafka

import (
	"time"

	"github.com/IBM/sarama"
)

// Version is the protocol version sarama assumes the brokers speak. 3.6 is new
// enough for the idempotent producer and the consumer-group protocol we use,
// and kfake speaks it; sarama still negotiates each request down with
// ApiVersions, so an older 3.x broker only loses newer request versions.
var Version = sarama.V3_6_0_0

// Timeouts shared by both configs. Net.ReadTimeout bounds how long sarama
// waits for any response, so it must exceed the longest wait the broker may
// legitimately take: Producer.Timeout for acks=all, and Rebalance.Timeout for
// a JoinGroup held while the other members rejoin.
const (
	dialTimeout      = 5 * time.Second
	writeTimeout     = 10 * time.Second
	produceTimeout   = 10 * time.Second
	rebalanceTimeout = 10 * time.Second
	readTimeout      = 15 * time.Second // > produceTimeout, rebalanceTimeout
)

// baseConfig sets what producers and consumers share.
func baseConfig(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = Version
	c.Net.DialTimeout = dialTimeout
	c.Net.ReadTimeout = readTimeout
	c.Net.WriteTimeout = writeTimeout
	// Topics are created explicitly (EnsureTopics) with a chosen partition
	// count; auto-creation would make a typo a new one-partition topic.
	c.Metadata.AllowAutoTopicCreation = false
	return c
}

// ProducerConfig returns the config of the idempotent producer: the broker
// de-duplicates sarama's own retries by (producer id, sequence), so a retry
// after a lost ack does not write the message twice. That holds within one
// producer session only; a restarted producer gets a new id.
//
// Idempotence requires acks from all in-sync replicas and one request in
// flight per broker (sarama does not keep ordering across several).
// Messages with the same key (order_id) go to the same partition through the
// hash partitioner, so one order's events stay in order. sarama hashes with
// FNV-1a, not the Java client's murmur2: do not mix producers on one topic if
// per-key placement matters across them.
func ProducerConfig(clientID string) *sarama.Config {
	c := baseConfig(clientID)
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Timeout = produceTimeout
	c.Producer.Partitioner = sarama.NewHashPartitioner
	// About 13 s of retries in total rides out a leader election; beyond
	// that the caller (the outbox relay) retries from its table.
	c.Producer.Retry.Max = 10
	c.Producer.Retry.BackoffFunc = func(retries, _ int) time.Duration {
		return capped(100*time.Millisecond, 2*time.Second, retries)
	}
	c.Producer.Return.Successes = true // a SyncProducer needs both
	c.Producer.Return.Errors = true
	return c
}

// ConsumerConfig returns the config for a Runner's consumer group.
//
// Offsets are committed by the Runner only after the handler succeeded, so
// auto-commit is off (it would commit whatever was marked on a timer, and
// sarama drops marked-but-uncommitted offsets on revocation anyway). A group
// without a committed offset starts from the oldest message: starting from
// the newest would silently skip what was produced before the group's first
// join.
//
// The session timeout is kfake's minimum (6 s): a killed member's partitions
// move after about that long. The rebalance timeout bounds how long a live
// member may take to finish its batch and rejoin; it is short so that one
// stuck member does not hold the group for Kafka's default minute.
func ConsumerConfig(clientID string) *sarama.Config {
	c := baseConfig(clientID)
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Return.Errors = true
	// sarama sends the group's commits on the same broker connection as its
	// fetches, and a broker answers one connection in order: a commit waits
	// behind a long-poll fetch for up to MaxWaitTime. The Runner commits
	// after every batch, so a consumer whose backlog is already buffered
	// pays it per batch (our 1,000-message test: 1.9 s at 250 ms, 0.6 s at
	// 100 ms). 100 ms keeps idle polling at 10 requests/s per broker.
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 6 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 2 * time.Second
	c.Consumer.Group.Rebalance.Timeout = rebalanceTimeout
	c.Consumer.Group.Rebalance.Retry.Backoff = time.Second
	// Eager: a rebalance ends the whole session, which cancels
	// session.Context() — the signal the Runner's retry loop stops on.
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	return c
}

// capped returns initial·2^n, never more than max.
func capped(initial, max time.Duration, n int) time.Duration {
	d := initial
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
