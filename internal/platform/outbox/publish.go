package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/IBM/sarama"
)

// publish sends rows in waves and returns the indexes (into rows) the broker
// acknowledged and those it did not, with their errors.
//
// The ordering rule: a message is sent only when every earlier selected
// message of its (topic, key) has been acknowledged. Wave n holds the n-th
// message of each key in the batch (so at most one message per key), and
// wave n+1 is sent after SendMessages of wave n has returned. When a message
// fails, its key is blocked for the rest of the round: none of the key's
// later messages is sent, so none can reach the topic ahead of it (sarama
// rolls the idempotent producer's epoch over on a failure, after which the
// broker would accept a later message of the same partition, so "the broker
// rejects anything after a gap" is not something to rely on). Other keys go
// on. Every acknowledged message may then be marked: for each key the
// acknowledged ones are a prefix of its selected ones, and the next round
// starts again from the first unpublished row, which is the failed one.
// Messages without a key promise no order and all go in the first wave.
func (r *Relay) publish(ctx context.Context, rows []row) (acked []int, failed map[int]error, err error) {
	failed = map[int]error{}
	waves := plan(rows)
	p, perr := r.producerFor()
	if perr != nil {
		for _, k := range waves[0] {
			failed[k] = perr
		}
		r.m.publishErrors.Add(float64(len(waves[0])))
		return nil, failed, perr
	}
	blocked := map[string]bool{}
	var firstErr error
	for _, wave := range waves {
		msgs := make([]*sarama.ProducerMessage, 0, len(wave))
		for _, k := range wave {
			if key := orderKey(rows[k]); key != "" && blocked[key] {
				continue
			}
			msgs = append(msgs, r.message(ctx, rows[k], k))
		}
		if len(msgs) == 0 {
			continue
		}
		sendErr := p.SendMessages(msgs)
		bad := map[int]error{}
		if sendErr != nil {
			var perrs sarama.ProducerErrors
			attributed := errors.As(sendErr, &perrs) && len(perrs) > 0
			for _, pe := range perrs {
				k, ok := 0, pe != nil && pe.Msg != nil
				if ok {
					k, ok = pe.Msg.Metadata.(int)
				}
				if !ok {
					attributed = false
					break
				}
				bad[k] = pe.Err
			}
			if !attributed { // not attributable to messages: assume none went out
				for _, m := range msgs {
					bad[m.Metadata.(int)] = sendErr
				}
			}
			if firstErr == nil {
				firstErr = sendErr
				if len(perrs) > 0 {
					firstErr = perrs[0] // names the topic and the broker's error
				}
			}
		}
		for _, m := range msgs {
			k := m.Metadata.(int)
			if e, ok := bad[k]; ok {
				failed[k] = e
				if key := orderKey(rows[k]); key != "" {
					blocked[key] = true
				}
				continue
			}
			acked = append(acked, k)
		}
	}
	sort.Ints(acked)
	r.m.published.Add(float64(len(acked)))
	r.m.publishErrors.Add(float64(len(failed)))
	if len(failed) > 0 {
		if len(acked) == 0 {
			// Nothing got through: the connection or the producer's state
			// is suspect, so the next round builds a new producer.
			r.dropProducer()
		}
		return acked, failed, fmt.Errorf("outbox: %d of %d events not acknowledged by Kafka: %w", len(failed), len(rows), firstErr)
	}
	return acked, failed, nil
}

// plan splits rows (in id order) into waves: wave n holds the n-th row of
// each (topic, key), in id order; keyless rows all go in wave 0.
func plan(rows []row) [][]int {
	seen := map[string]int{}
	var waves [][]int
	for k, rw := range rows {
		n := 0
		if key := orderKey(rw); key != "" {
			n = seen[key]
			seen[key] = n + 1
		}
		for len(waves) <= n {
			waves = append(waves, nil)
		}
		waves[n] = append(waves[n], k)
	}
	return waves
}

// orderKey is what order is kept per: the topic and the key ("" when keyless).
func orderKey(rw row) string {
	if rw.MsgKey == "" {
		return ""
	}
	return rw.Topic + "\x00" + rw.MsgKey
}

// message builds the record for rows[k]; Metadata carries k back from sarama.
func (r *Relay) message(ctx context.Context, rw row, k int) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: rw.Topic, Metadata: k}
	if rw.MsgKey != "" {
		m.Key = sarama.StringEncoder(rw.MsgKey)
	}
	if rw.Payload != nil {
		m.Value = sarama.ByteEncoder(rw.Payload)
	}
	h := map[string]string{}
	if err := json.Unmarshal([]byte(rw.Headers), &h); err != nil {
		// Add always writes valid JSON; a row edited by hand still goes out,
		// with the header consumers need, rather than blocking its key.
		r.log.ErrorContext(ctx, "outbox: undecodable headers; sending event_id only", "event_id", rw.EventID, "err", err)
		h = nil
	}
	if h == nil { // also "null"
		h = map[string]string{}
	}
	h[HeaderEventID] = rw.EventID
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(name), Value: []byte(h[name])})
	}
	return m
}

// errText is err's message cut to last_error's width on a rune boundary.
func errText(err error) string {
	s := strings.ToValidUTF8(err.Error(), "?")
	if len(s) <= maxError {
		return s
	}
	s = s[:maxError]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
