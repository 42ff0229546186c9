package consumer

import (
	"context"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
)

// deadLetter copies msg to the DLQ unless this process already did. The
// send is abandoned (an error: the batch is retried) when ctx ends, so a
// shutdown or rebalance never waits on a broker; the abandoned send may
// still land, which at worst makes a second copy.
func (c *Consumer) deadLetter(ctx context.Context, msg *sarama.ConsumerMessage, why *poison) error {
	key := position(msg)
	c.mu.Lock()
	done := c.sent[key]
	c.mu.Unlock()
	if done {
		return nil
	}
	res := make(chan error, 1)
	go func() { res <- c.dlq.Send(ctx, msg, why.String()) }()
	select {
	case err := <-res:
		if err != nil {
			return fmt.Errorf("consumer: dead-letter %s: %w", key, err)
		}
	case <-ctx.Done():
		return fmt.Errorf("consumer: dead-letter %s: %w", key, ctx.Err())
	}
	c.mu.Lock()
	if len(c.sent) > maxRemembered { // partitions moved away: forget, at worst a second copy
		clear(c.sent)
	}
	c.sent[key] = true
	c.mu.Unlock()
	c.log.Warn("payment event dead-lettered", "topic", msg.Topic, "partition", msg.Partition,
		"offset", msg.Offset, "reason", why.String())
	return nil
}

const maxRemembered = 10_000

// forget drops the positions of a committed batch.
func (c *Consumer) forget(bad []badMessage) {
	if len(bad) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range bad {
		delete(c.sent, position(b.msg))
	}
}

func position(m *sarama.ConsumerMessage) string {
	return m.Topic + "/" + strconv.Itoa(int(m.Partition)) + "@" + strconv.FormatInt(m.Offset, 10)
}
