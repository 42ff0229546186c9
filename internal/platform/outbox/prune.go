package outbox

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
)

// pruneBatch bounds one DELETE: short transactions keep the fence row and the
// deleted rows locked only briefly, so writers and the relay's marks do not
// queue behind a large purge.
const pruneBatch = 1000

// prune deletes rows published more than Retention ago, pruneBatch at a time,
// each batch in its own fenced transaction. Unpublished rows are never
// deleted, however old: the condition is on published_at, re-checked by the
// DELETE itself, so a row redriven (published_at = NULL) between the two
// statements stays. It stops at the first error; the next prune resumes.
func (r *Relay) prune(ctx context.Context, fence lock.Fence) error {
	var total int64
	for ctx.Err() == nil {
		cutoff := db.Now().Add(-r.cfg.Retention)
		var n int64
		err := fence.Tx(ctx, r.cfg.DB, func(tx *gorm.DB) error {
			var ids []int64
			if err := tx.Raw(`SELECT id FROM outbox_events WHERE published_at IS NOT NULL AND published_at < ?
				ORDER BY published_at, id LIMIT ?`, cutoff, pruneBatch).Scan(&ids).Error; err != nil {
				return err
			}
			if len(ids) == 0 {
				return nil
			}
			res := tx.Exec(`DELETE FROM outbox_events WHERE id IN ? AND published_at IS NOT NULL AND published_at < ?`, ids, cutoff)
			n = res.RowsAffected
			return res.Error
		})
		switch {
		case errors.Is(err, lock.ErrFenced):
			r.fenced(ctx, "prune", err)
			return err
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			r.m.dbErrors.WithLabelValues("prune").Inc()
			return fmt.Errorf("outbox: prune: %w", err)
		}
		total += n
		r.m.pruned.Add(float64(n))
		if n < pruneBatch {
			break
		}
	}
	if total > 0 {
		r.log.InfoContext(ctx, "outbox: pruned published events", "rows", total, "retention", r.cfg.Retention.String())
	}
	return nil
}
