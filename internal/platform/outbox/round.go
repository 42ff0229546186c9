package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
)

// markTimeout bounds the transaction that marks acknowledged rows. It runs on
// a context detached from the job's, so a shutdown (or a lost lock) right
// after a publish still records it instead of leaving duplicates behind; the
// fence, not the context, decides whether a stale relay may write.
const markTimeout = 10 * time.Second

// row is one unpublished outbox row as the relay reads it.
type row struct {
	ID        int64
	EventID   string
	Topic     string
	MsgKey    string
	Payload   []byte
	Headers   string
	CreatedAt time.Time
}

// roundResult tells hold what a round did.
type roundResult struct {
	marked int  // acknowledged messages recorded as published
	full   bool // the batch was full and all of it went out: more may wait
}

// round is one select-publish-mark cycle. Rows are chosen by their flag
// (published_at IS NULL) in id order every time, never after a remembered
// id: an id is taken at insert but becomes visible at commit, so a lower id
// can appear after a higher one was relayed, and a cursor would skip it.
func (r *Relay) round(ctx context.Context, fence lock.Fence, pending *[]int64) (roundResult, error) {
	if len(*pending) > 0 {
		// A database error lost the last mark: record those first, so a blip
		// does not republish a batch the broker already has.
		if err := r.mark(ctx, fence, *pending, nil); err != nil {
			if errors.Is(err, lock.ErrFenced) {
				*pending = nil
			}
			return roundResult{}, err
		}
		*pending = nil
	}
	var rows []row
	err := r.cfg.DB.WithContext(ctx).Raw(`SELECT id, event_id, topic, msg_key, payload, headers, created_at
		FROM outbox_events WHERE published_at IS NULL ORDER BY id LIMIT ?`, r.cfg.BatchSize).Scan(&rows).Error
	if err != nil {
		if ctx.Err() == nil {
			r.m.dbErrors.WithLabelValues("select").Inc()
		}
		return roundResult{}, fmt.Errorf("outbox: select unpublished: %w", err)
	}
	if len(rows) == 0 {
		return roundResult{}, nil
	}
	start := time.Now()
	acked, failed, pubErr := r.publish(ctx, rows)
	if r.afterPublish != nil && len(acked) > 0 {
		ids := make([]string, len(acked))
		for i, k := range acked {
			ids[i] = rows[k].EventID
		}
		r.afterPublish(ids)
	}
	ackedIDs := make([]int64, len(acked))
	for i, k := range acked {
		ackedIDs[i] = rows[k].ID
	}
	failedIDs := map[string][]int64{}
	for k, e := range failed {
		msg := errText(e)
		failedIDs[msg] = append(failedIDs[msg], rows[k].ID)
	}
	markErr := r.mark(ctx, fence, ackedIDs, failedIDs)
	r.m.batch.Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(markErr, lock.ErrFenced):
		return roundResult{}, markErr
	case markErr != nil:
		*pending = ackedIDs
		return roundResult{}, errors.Join(markErr, pubErr)
	}
	return roundResult{marked: len(acked), full: len(rows) == r.cfg.BatchSize && len(failed) == 0}, pubErr
}

// mark records a round's outcome in one fenced transaction: acknowledged rows
// become published, failed rows count an attempt and keep the error. Both
// updates require published_at IS NULL, so a row marked meanwhile is left as
// it is.
func (r *Relay) mark(ctx context.Context, fence lock.Fence, acked []int64, failed map[string][]int64) error {
	if len(acked) == 0 && len(failed) == 0 {
		return nil
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	var marked int64
	err := fence.Tx(mctx, r.cfg.DB, func(tx *gorm.DB) error {
		if len(acked) > 0 {
			res := tx.Exec("UPDATE outbox_events SET published_at = ? WHERE id IN ? AND published_at IS NULL", db.Now(), acked)
			if res.Error != nil {
				return res.Error
			}
			marked = res.RowsAffected
		}
		for msg, ids := range failed {
			if err := tx.Exec("UPDATE outbox_events SET attempts = attempts + 1, last_error = ? WHERE id IN ? AND published_at IS NULL",
				msg, ids).Error; err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, lock.ErrFenced):
		r.fenced(ctx, "mark", err)
		return err
	case err != nil:
		r.m.dbErrors.WithLabelValues("mark").Inc()
		return fmt.Errorf("outbox: mark published: %w", err)
	}
	r.m.marked.Add(float64(marked))
	return nil
}

// fenced counts and reports a write the fence refused: a newer holder exists,
// so this relay stops; anything it published and could not mark is published
// again by that holder (duplicates, absorbed by consumers' event_id).
func (r *Relay) fenced(ctx context.Context, what string, err error) {
	r.m.fenced.Inc()
	r.log.WarnContext(ctx, "outbox: fenced: a newer relay holds the job; stopping", "write", what, "err", err)
	if r.onFenced != nil {
		r.onFenced()
	}
}
