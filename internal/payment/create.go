package payment

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/ids"
)

// Bounds of POST /v1/payments.
const (
	MinAmountCents = 1
	MaxAmountCents = 1_000_000_000_000 // the order service's total bound
	MaxIDLen       = 64                // order_id, user_id (bytes)
)

// NewPayment is what the order service asks for: a payment of an order.
type NewPayment struct {
	OrderID     string
	UserID      string
	AmountCents int64
	Currency    string
}

// Validate returns a 400 invalid_request *apperr.Error naming the first
// offending field, or nil.
func (n NewPayment) Validate() error {
	if err := checkRef("order_id", n.OrderID); err != nil {
		return err
	}
	if err := checkRef("user_id", n.UserID); err != nil {
		return err
	}
	if n.AmountCents < MinAmountCents || n.AmountCents > MaxAmountCents {
		return invalid("amount_cents must be %d to %d; got %d.", MinAmountCents, int64(MaxAmountCents), n.AmountCents)
	}
	if !ids.IsCurrency(n.Currency) {
		return invalid("currency must be an ISO 4217 code of three upper-case letters (e.g. CNY); got %q.", clip(n.Currency, 16))
	}
	return nil
}

// checkRef accepts 1–64 of [A-Za-z0-9_.:-]: ids of the order service, safe
// in logs, keys and Kafka message keys as they are.
func checkRef(field, s string) error {
	if len(s) == 0 || len(s) > MaxIDLen {
		return invalid("%s must be 1 to %d characters; got %d.", field, MaxIDLen, len(s))
	}
	if !ids.IsRef(s, MaxIDLen) {
		return invalid("%s may hold only letters, digits and _ . : -; got %q.", field, clip(s, 32))
	}
	return nil
}

// maxCreateRounds bounds the read-insert loop. Each lost insert means another
// request committed that very attempt, which the next read returns; only a
// payment failing again between our read and insert costs another round.
const maxCreateRounds = 5

// Create returns the order's live payment, creating it if there is none:
//
//   - no payment yet: attempt 1, created (201);
//   - the latest is PENDING or SUCCEEDED: that one again (200) — but 409
//     payment_mismatch if the amount or currency differ from it;
//   - the latest FAILED: the next attempt, created (201);
//   - the latest was REFUNDED: 409 invalid_transition (no attempt after a
//     refund).
//
// Race safety comes from UNIQUE(order_id, attempt), not from the read: of
// any number of concurrent calls for one order, one insert of an attempt
// wins, and the others, refused by the index, read again and return the
// winner's payment. The bool reports whether this call inserted the row
// (201) or returned an existing one (200). Errors: 400 invalid_request, 409
// as above, 503 when the database fails.
func (s *Service) Create(ctx context.Context, n NewPayment) (Payment, bool, error) {
	if err := n.Validate(); err != nil {
		return Payment{}, false, err
	}
	for range maxCreateRounds {
		latest, err := s.store.Latest(ctx, n.OrderID)
		attempt := 1
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return Payment{}, false, dbUnavailable(err)
		case latest.Status.Live():
			if latest.AmountCents != n.AmountCents || latest.Currency != n.Currency {
				s.m.creates[CreateMismatch].Inc()
				return Payment{}, false, apperr.New(apperr.PaymentMismatch,
					"Order %s already has payment %s for %d %s; this request asks for %d %s.",
					n.OrderID, FormatID(latest.ID), latest.AmountCents, latest.Currency, n.AmountCents, n.Currency)
			}
			s.m.creates[CreateExisting].Inc()
			return latest, false, nil
		case latest.Status == Refunded:
			s.m.creates[CreateAfterRefund].Inc()
			return Payment{}, false, apperr.New(apperr.InvalidTransition,
				"Order %s's payment %s was refunded; no new attempt is made.", n.OrderID, FormatID(latest.ID))
		default: // FAILED
			attempt = latest.Attempt + 1
		}
		p := Payment{OrderID: n.OrderID, UserID: n.UserID, Attempt: attempt, Status: Pending,
			AmountCents: n.AmountCents, Currency: n.Currency}
		err = s.store.Create(ctx, &p)
		switch {
		case err == nil:
			if attempt == 1 {
				s.m.creates[CreateNew].Inc()
			} else {
				s.m.creates[CreateNextAttempt].Inc()
			}
			return p, true, nil
		case errors.Is(err, ErrDuplicate):
			continue // someone else inserted this attempt: read it
		default:
			return Payment{}, false, dbUnavailable(err)
		}
	}
	return Payment{}, false, dbUnavailable(fmt.Errorf("payment: order %s: no stable attempt after %d rounds", n.OrderID, maxCreateRounds))
}
