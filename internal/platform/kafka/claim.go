package kafka

import (
	"context"
	"time"

	"github.com/IBM/sarama"
)

// claimHandler adapts a Runner to sarama.ConsumerGroupHandler.
type claimHandler struct{ r *Runner }

func (*claimHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*claimHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim takes what the claim has ready now (at least one message, at
// most MaxBatch, never waiting for more: latency beats batch size here) and
// hands it to the handler until it succeeds. It returns as soon as the
// session ends, which is what lets a rebalance complete.
func (h *claimHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	r := h.r
	defer r.m.dropLag(r.cfg.Group, claim)
	ctx := sess.Context()
	msgs := claim.Messages()
	for {
		var first *sarama.ConsumerMessage
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			first = m
		}
		// A fresh slice per batch: the handler may keep the one it got.
		batch := []*sarama.ConsumerMessage{first}
		open := true
	fill:
		for len(batch) < r.cfg.MaxBatch {
			select {
			case m, ok := <-msgs:
				if !ok {
					open = false
					break fill
				}
				batch = append(batch, m)
			default:
				break fill
			}
		}
		if !r.handle(sess, claim, batch) || !open {
			return nil
		}
	}
}

// handle calls the handler until it succeeds, then marks and commits the
// last message. It reports false when the session ended first; nothing of
// the batch was marked then, so it is redelivered from its first message.
func (r *Runner) handle(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim, batch []*sarama.ConsumerMessage) bool {
	ctx := sess.Context()
	first, last := batch[0], batch[len(batch)-1]
	topic := claim.Topic()
	r.m.setLag(r.cfg.Group, claim, first.Offset)
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return false
		}
		if attempt > 0 {
			r.m.retries.WithLabelValues(r.cfg.Group, topic).Inc()
		}
		err := r.cfg.Handler(ctx, batch)
		if err == nil {
			// sarama does not redeliver within a session, so marking past a
			// failed message would lose it; we only get here on success.
			sess.MarkMessage(last, "")
			// Synchronous; a failed commit is reported on group.Errors()
			// and retried by the next Commit, and until then a restart
			// redelivers (at-least-once).
			sess.Commit()
			r.m.handled.WithLabelValues(r.cfg.Group, topic).Add(float64(len(batch)))
			r.m.setLag(r.cfg.Group, claim, last.Offset+1)
			return true
		}
		if ctx.Err() != nil {
			// Most likely the handler gave up because the session ended
			// (shutdown, rebalance): not a handler failure. The batch is
			// unmarked and comes again.
			r.log.Debug("kafka batch interrupted by the end of the session; it will be redelivered",
				"topic", topic, "partition", claim.Partition(), "first_offset", first.Offset, "err", err)
			return false
		}
		r.m.errors.WithLabelValues(r.cfg.Group, topic).Inc()
		r.log.Warn("kafka handler failed; retrying the same batch",
			"topic", topic, "partition", claim.Partition(),
			"first_offset", first.Offset, "last_offset", last.Offset,
			"attempt", attempt, "err", err)
		if !sleep(ctx, r.cfg.Backoff.delay(attempt)) {
			return false
		}
	}
}

// sleep waits d or until ctx is done; it reports whether the full d passed.
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
