package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/db"
)

// attachRounds bounds AttachPayment's loop: a round is lost only when another
// request attached a different payment between our UPDATE and our read.
const attachRounds = 3

// AttachPayment implements order.Store with one conditional UPDATE,
//
//	UPDATE orders SET payment_id=?, version=version+1, updated_at=?
//	WHERE id=? AND status='PENDING_PAYMENT' AND (payment_id IS NULL OR payment_id <> ?)
//
// The last condition makes a repeated attach of the same payment a no-op
// (version moves only when the row really changes, which also keeps MySQL's
// rows-changed count honest). When it matches no row, a read after the write
// tells "already attached" (nil) from "no longer PENDING_PAYMENT"
// (ErrConflict); the status itself is never decided from that read.
func (s *Store) AttachPayment(ctx context.Context, id int64, paymentID string) error {
	if paymentID == "" {
		return errors.New("store: attach payment: empty payment id")
	}
	for range attachRounds {
		res := s.db.WithContext(ctx).Exec(`UPDATE orders SET payment_id = ?, version = version + 1, updated_at = ?
WHERE id = ? AND status = ? AND (payment_id IS NULL OR payment_id <> ?)`,
			paymentID, db.Now(), id, string(order.PendingPayment), paymentID)
		if res.Error != nil {
			return fmt.Errorf("store: attach payment to order %d: %w", id, res.Error)
		}
		if res.RowsAffected == 1 {
			return nil
		}
		var cur struct {
			Status    string
			PaymentID sql.NullString
		}
		err := s.db.WithContext(ctx).Table("orders").Select("status, payment_id").Where("id = ?", id).Take(&cur).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return fmt.Errorf("store: attach payment to order %d: %w", id, order.ErrConflict)
		case err != nil:
			return fmt.Errorf("store: attach payment to order %d: %w", id, err)
		case cur.Status != string(order.PendingPayment):
			return fmt.Errorf("store: attach payment to order %d (now %s): %w", id, cur.Status, order.ErrConflict)
		case cur.PaymentID.String == paymentID:
			return nil
		}
		// Another request attached another payment between the UPDATE and
		// the read. Both came from the payment service; the last write
		// wins, and the PAID transition records the payment that succeeded
		// whatever is attached here.
	}
	return fmt.Errorf("store: attach payment to order %d: the row kept changing", id)
}
