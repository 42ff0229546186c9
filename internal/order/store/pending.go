package store

import (
	"context"
	"fmt"
	"time"

	"github.com/onceonly/onceonly/internal/order"
)

// CreatedKey is a position in the (created_at, id) order the timeout closer
// pages by.
type CreatedKey struct {
	CreatedAt time.Time
	ID        int64
}

// PendingBefore returns up to limit PENDING_PAYMENT orders created before
// cutoff, oldest first by (created_at, id), after the key after (nil: from
// the oldest). Keyset on idx_orders_status_created, never OFFSET: a page
// costs the same however far the pass has gone, and orders cancelled or paid
// meanwhile neither shift nor repeat the next page. It reads; the caller
// decides with the CAS Transition, which alone is authoritative.
func (s *Store) PendingBefore(ctx context.Context, cutoff time.Time, after *CreatedKey, limit int) ([]CreatedKey, error) {
	q := s.db.WithContext(ctx).Table("orders").Select("id, created_at").
		Where("status = ? AND created_at < ?", string(order.PendingPayment), cutoff.UTC())
	if after != nil {
		at := after.CreatedAt.UTC()
		q = q.Where("(created_at > ? OR (created_at = ? AND id > ?))", at, at, after.ID)
	}
	var rows []struct {
		ID        int64
		CreatedAt time.Time
	}
	if err := q.Order("created_at, id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: pending before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	out := make([]CreatedKey, len(rows))
	for i, r := range rows {
		out[i] = CreatedKey{CreatedAt: r.CreatedAt.UTC(), ID: r.ID}
	}
	return out, nil
}
