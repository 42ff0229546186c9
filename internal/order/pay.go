package order

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// payRounds bounds Pay's loop: a round is repeated only when the order left
// PENDING_PAYMENT between the payment service's answer and the attach.
const payRounds = 2

// Pay returns the live payment of the user's order, asking the payment
// service for it (POST /v1/payments, idempotent on the order id) while the
// order is PENDING_PAYMENT:
//
//	PENDING_PAYMENT → the live payment (PENDING or SUCCEEDED), created if there
//	                  is none or the latest FAILED; its id is attached to the
//	                  order (AttachPayment: a conditional UPDATE that keeps the
//	                  status). created is true when the payment service
//	                  answered 201.
//	PAID            → the payment that paid it (GET /v1/payments/{id}).
//	CANCELLED       → 409 invalid_transition.
//
// If the order leaves PENDING_PAYMENT while the payment service answers (the
// consumer marks it PAID, the user or the timeout closer cancels it), the
// attach matches no row and Pay answers for the order's new state; a payment
// created for an order cancelled meanwhile is left to reconciliation, which
// refunds it should it ever succeed.
//
// Errors: 404 not_found (unparsable, unknown or another user's id); 409
// invalid_transition (CANCELLED, or the order's payment was refunded); 409
// payment_mismatch (the order's live payment has another amount or
// currency); 503 dependency_unavailable (the payment service or the database
// did not answer). Anything else is a bug: 500.
func (s *Service) Pay(ctx context.Context, user, id string) (p Payment, created bool, err error) {
	n, ok := ParseID(id)
	if !ok {
		return Payment{}, false, notFound()
	}
	if s.payments == nil {
		return Payment{}, false, errors.New("order: Pay: no Payments configured")
	}
	o, err := s.get(ctx, user, n)
	if err != nil {
		return Payment{}, false, err
	}
	for range payRounds {
		switch o.Status {
		case Cancelled:
			return Payment{}, false, apperr.New(apperr.InvalidTransition,
				"Order is %s; only a %s order can be paid.", o.Status, PendingPayment)
		case Paid:
			p, err := s.paidWith(ctx, o)
			return p, false, err
		}
		p, created, err = s.payments.Create(ctx, PaymentRequest{
			OrderID: FormatID(o.ID), UserID: o.UserID, AmountCents: o.AmountCents, Currency: o.Currency,
		})
		if err != nil {
			return Payment{}, false, paymentErr(err)
		}
		err = s.store.AttachPayment(ctx, o.ID, p.ID)
		if err == nil {
			return p, created, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Payment{}, false, dbUnavailable(err)
		}
		// The order left PENDING_PAYMENT meanwhile: answer for what it is now.
		if o, err = s.get(ctx, user, n); err != nil {
			return Payment{}, false, err
		}
	}
	return Payment{}, false, fmt.Errorf("order: pay order %d: the order kept changing state", n)
}

// paidWith returns the payment that paid o.
func (s *Service) paidWith(ctx context.Context, o Order) (Payment, error) {
	if o.PaymentID == "" {
		// Reconciliation flags this (PAID without a payment); never invent one.
		return Payment{}, fmt.Errorf("order: order %d is PAID without a payment id", o.ID)
	}
	p, err := s.payments.Get(ctx, o.PaymentID)
	if err != nil {
		return Payment{}, paymentErr(fmt.Errorf("order %d: %w", o.ID, err))
	}
	return p, nil
}

// get is Get for an id already parsed.
func (s *Service) get(ctx context.Context, user string, id int64) (Order, error) {
	o, err := s.store.Get(ctx, user, id)
	if errors.Is(err, ErrNotFound) {
		return Order{}, notFound()
	}
	if err != nil {
		return Order{}, dbUnavailable(err)
	}
	return o, nil
}

// paymentErr maps a Payments error to the client's answer. Anything not
// named here (a 401 from a wrong token, a payment the service cannot find,
// an answer that does not decode) is our bug or misconfiguration: 500, with
// the cause in the log only.
func paymentErr(err error) error {
	switch {
	case errors.Is(err, ErrPaymentMismatch):
		return apperr.Wrap(err, apperr.PaymentMismatch,
			"The order already has a live payment for a different amount or currency.")
	case errors.Is(err, ErrPaymentRefused):
		return apperr.Wrap(err, apperr.InvalidTransition,
			"The order's payment was refunded; no new payment is made.")
	case errors.Is(err, ErrPaymentsUnavailable):
		return apperr.Wrap(err, apperr.DependencyUnavailable, "The payment service is unavailable; try again later.")
	}
	return fmt.Errorf("order: payment service: %w", err)
}
