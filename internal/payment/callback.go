package payment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/db"
)

// MaxGatewayTxnIDLen bounds a callback's gateway_txn_id (bytes).
const MaxGatewayTxnIDLen = 128

// Callback is a gateway's notification of a payment's outcome, as decoded
// from a verified body. Pointers tell a missing field from a zero one.
type Callback struct {
	PaymentID    *string
	GatewayTxnID *string
	Status       *string
	AmountCents  *int64
	Currency     *string
	// Raw is the body as received, kept in a mismatch or conflict record.
	Raw []byte
	// RequestID is the id of the request that delivered it: the event's
	// request_id header and the record's, for tracing.
	RequestID string
}

// Result is the callback's answer: 200 {"result": Result}.
type Result string

// OutcomeCallback is the callback that reports the gateway's outcome o of p
// (from Gateway.Query): reconciliation applies it with ApplyCallback, the
// callback's own path, so a queried outcome is applied exactly as a
// delivered one would be. o must not be PENDING (that changes nothing).
func OutcomeCallback(p Payment, o Outcome, requestID string) Callback {
	id, txn, st, amount, cur := FormatID(p.ID), o.GatewayTxnID, string(o.Status), p.AmountCents, p.Currency
	return Callback{PaymentID: &id, GatewayTxnID: &txn, Status: &st, AmountCents: &amount, Currency: &cur,
		RequestID: requestID}
}

// Authenticate verifies a callback's signature and timestamp over the raw
// body before anything in it is parsed (Verifier.Verify). Errors: 401
// unauthenticated, counted as bad_signature or stale.
func (s *Service) Authenticate(timestamp, signature string, body []byte) error {
	err := s.verifier.Verify(timestamp, signature, body)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrStale):
		s.m.callbacks[ResultStale].Inc()
		return apperr.Wrap(err, apperr.Unauthenticated,
			"%s is more than %d s away from the server's clock.", TimestampHeader, int(MaxSkew/time.Second))
	case errors.Is(err, ErrUnsigned):
		s.m.callbacks[ResultBadSignature].Inc()
		return apperr.Wrap(err, apperr.Unauthenticated,
			"%s (unix seconds) and %s (hex HMAC-SHA256) are required.", TimestampHeader, SignatureHeader)
	default:
		s.m.callbacks[ResultBadSignature].Inc()
		return apperr.Wrap(err, apperr.Unauthenticated, "%s does not verify.", SignatureHeader)
	}
}

// RejectCallback counts a verified callback whose body did not decode (the
// HTTP adapter answers it with err, a 400 or 413) and returns err.
func (s *Service) RejectCallback(err error) error {
	s.m.callbacks[ResultInvalid].Inc()
	return err
}

// ApplyCallback applies a verified gateway callback (or a gateway Query
// answer, which reconciliation passes through the same path):
//
//   - a malformed one is 400 invalid_request; an unknown payment 404;
//   - amount or currency differing from the payment's: 422 amount_mismatch,
//     nothing changes, the callback is recorded;
//   - a PENDING payment: in ONE transaction the conditional UPDATE PENDING →
//     SUCCEEDED|FAILED (with gateway_txn_id) and the outbox event; then the
//     relay is woken. "processed".
//   - a payment no longer PENDING: "duplicate" if it already has this
//     outcome (SUCCEEDED for SUCCEEDED or REFUNDED, FAILED for FAILED),
//     whatever the gateway_txn_id; otherwise "conflict": nothing changes,
//     the callback is recorded and counted.
//
// Of any number of identical callbacks at once, exactly one UPDATE matches
// the PENDING row, so one transition and one event happen; the others see
// the row changed (or lose the UPDATE and read it again) and answer
// "duplicate". Errors: 503 when the database fails — then nothing was
// written, because the transaction holds both rows.
func (s *Service) ApplyCallback(ctx context.Context, cb Callback) (Result, error) {
	res, err := s.applyCallback(ctx, cb)
	s.m.callbacks[callbackResult(res, err)].Inc()
	return res, err
}

func (s *Service) applyCallback(ctx context.Context, cb Callback) (Result, error) {
	to, err := cb.validate()
	if err != nil {
		return "", err
	}
	id, ok := ParseID(*cb.PaymentID)
	if !ok {
		return "", notFound()
	}
	p, err := s.store.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", notFound()
	case err != nil:
		return "", dbUnavailable(err)
	}
	if p.AmountCents != *cb.AmountCents || p.Currency != *cb.Currency {
		if err := s.record(ctx, RecordMismatch, p.ID, to, cb); err != nil {
			return "", err
		}
		return "", apperr.New(apperr.AmountMismatch, "Callback says %d %s; payment %s is %d %s.",
			*cb.AmountCents, clip(*cb.Currency, 8), FormatID(p.ID), p.AmountCents, p.Currency)
	}
	// Two rounds suffice: a lost UPDATE means the row left PENDING, and
	// nothing ever returns a payment to PENDING.
	for range 2 {
		if p.Status != Pending {
			break
		}
		at := db.Now()
		ev := s.event(p, to, at)
		err := s.store.Transition(ctx, p.ID, Pending, to, Change{
			At: at, GatewayTxnID: *cb.GatewayTxnID, Event: &ev, RequestID: cb.RequestID,
		})
		if err == nil {
			s.notify()
			return ResultProcessed, nil
		}
		if !errors.Is(err, ErrConflict) {
			return "", dbUnavailable(err)
		}
		// Another callback won the UPDATE: read what it wrote.
		if p, err = s.store.Get(ctx, id); err != nil {
			return "", dbUnavailable(err)
		}
	}
	if p.Status.Reports(to) {
		return ResultDuplicate, nil
	}
	if p.Status == Pending { // unreachable: see the loop
		return "", dbUnavailable(fmt.Errorf("payment %d still PENDING after a lost transition", p.ID))
	}
	if err := s.record(ctx, RecordConflict, p.ID, to, cb); err != nil {
		return "", err
	}
	s.log.WarnContext(ctx, "payment: callback contradicts the payment's outcome; recorded, nothing changed",
		"payment_id", p.ID, "status", p.Status, "callback_status", to)
	return ResultConflict, nil
}

// event is the outbox event of p's transition to `to` at `at`, with a fresh
// event id: consumers de-duplicate on it, so a re-publish carries the same.
func (s *Service) event(p Payment, to Status, at time.Time) events.Event {
	return EventOf(p, to, at, uuid.NewString())
}

// record keeps a callback that changed nothing. If it cannot be kept the
// answer is 503, so the gateway retries and the record is not lost.
func (s *Service) record(ctx context.Context, kind string, id int64, st Status, cb Callback) error {
	err := s.store.Record(ctx, CallbackRecord{Kind: kind, PaymentID: id, Status: st,
		RequestID: cb.RequestID, Body: cb.Raw, ReceivedAt: db.Now()})
	if err != nil {
		return dbUnavailable(err)
	}
	return nil
}

// validate checks the fields every callback must carry and returns its
// status. Unknown fields were already ignored by the decoder.
func (cb Callback) validate() (Status, error) {
	var missing []string
	for _, f := range []struct {
		name    string
		present bool
	}{
		{"payment_id", cb.PaymentID != nil && *cb.PaymentID != ""},
		{"gateway_txn_id", cb.GatewayTxnID != nil && *cb.GatewayTxnID != ""},
		{"status", cb.Status != nil},
		{"amount_cents", cb.AmountCents != nil},
		{"currency", cb.Currency != nil},
	} {
		if !f.present {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return "", invalid("The callback lacks %s.", strings.Join(missing, ", "))
	}
	if st := Status(*cb.Status); st != Succeeded && st != Failed {
		return "", invalid("status must be SUCCEEDED or FAILED; got %q.", clip(*cb.Status, 16))
	}
	txn := *cb.GatewayTxnID
	if len(txn) > MaxGatewayTxnIDLen || !utf8.ValidString(txn) || strings.IndexFunc(txn, unicode.IsControl) >= 0 {
		return "", invalid("gateway_txn_id must be at most %d bytes of printable UTF-8.", MaxGatewayTxnIDLen)
	}
	return Status(*cb.Status), nil
}

func callbackResult(res Result, err error) string {
	if err == nil {
		return string(res)
	}
	switch apperr.CodeOf(err) {
	case apperr.NotFound:
		return ResultNotFound
	case apperr.AmountMismatch:
		return ResultMismatch
	case apperr.InvalidRequest, apperr.InvalidJSON:
		return ResultInvalid
	default:
		return ResultUnavailable
	}
}
