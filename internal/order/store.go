package order

import (
	"context"
	"errors"
	"time"

	"github.com/onceonly/onceonly/internal/platform/idempotency"
)

// Errors a Store returns; any other error is a failure of the database
// itself (the service answers 503).
var (
	// ErrNotFound: no such order (for this user, where one is given).
	ErrNotFound = errors.New("order: not found")
	// ErrDuplicateSubmit: Create found an order with the same submit token.
	// The UNIQUE index decides this, whatever Redis said.
	ErrDuplicateSubmit = errors.New("order: submit token already used")
	// ErrConflict: Transition matched no row — the order is not in the
	// expected state (or does not exist, or is not the owner's). Nothing changed.
	ErrConflict = errors.New("order: state changed concurrently or transition not applicable")
	// ErrIllegalTransition: the edge is not in the state machine; no statement
	// was sent. A programming error, not a race.
	ErrIllegalTransition = errors.New("order: transition not in the state machine")
)

// Store keeps orders. Implementations must be safe for concurrent use and
// must never change a status except through Transition.
type Store interface {
	// Create inserts o (its ID zero) with Version 1 and sets o.ID. A second
	// order with the same SubmitToken is ErrDuplicateSubmit.
	Create(ctx context.Context, o *Order) error
	// BySubmitToken returns the user's order created with token, or
	// ErrNotFound (also when the token belongs to another user's order).
	BySubmitToken(ctx context.Context, userID, token string) (Order, error)
	// Get returns the order with id, or ErrNotFound. A non-empty userID also
	// requires the order to be that user's (another user's order is not found).
	Get(ctx context.Context, userID string, id int64) (Order, error)
	// List returns up to q.Limit of q.UserID's orders, newest (highest id)
	// first, with id < q.BeforeID when BeforeID > 0.
	List(ctx context.Context, q ListQuery) ([]Order, error)
	// ListUpdated returns up to q.Limit orders with From ≤ updated_at < To,
	// ordered by (updated_at, id), after the key q.After when it is set.
	ListUpdated(ctx context.Context, q UpdatedQuery) ([]Order, error)
	// GetMany returns the orders among ids that exist, by id ascending.
	GetMany(ctx context.Context, ids []int64) ([]Order, error)
	// Transition moves order id from → to in one conditional UPDATE
	// (status, version+1, updated_at and extra.Set together), applied only
	// if the row is still in from (and owned by extra.OwnerID, if set).
	// ErrConflict when no row matched; ErrIllegalTransition when the edge is
	// not in the state machine. Never read-then-write.
	Transition(ctx context.Context, id int64, from, to Status, extra *Extra) error
	// AttachPayment records paymentID on order id while it is
	// PENDING_PAYMENT, in one conditional UPDATE that keeps the status and
	// bumps version (only when the id changes: attaching the same payment
	// again changes nothing). nil when paymentID is attached, now or before;
	// ErrConflict when the order is no longer PENDING_PAYMENT (or does not
	// exist): nothing changed.
	AttachPayment(ctx context.Context, id int64, paymentID string) error
}

// Extra refines a Transition.
type Extra struct {
	// OwnerID, if non-empty, also requires user_id = OwnerID: a user acting on
	// their own order.
	OwnerID string
	// Set holds further columns written by the same UPDATE, by column name
	// (e.g. "payment_id"). It may not name status, version, updated_at or id.
	Set map[string]any
}

// ListQuery selects a page of one user's orders.
type ListQuery struct {
	UserID   string
	Status   Status // "" = every status
	BeforeID int64  // 0 = from the newest
	Limit    int
}

// UpdatedKey is a position in the (updated_at, id) order.
type UpdatedKey struct {
	UpdatedAt time.Time
	ID        int64
}

// UpdatedQuery selects a page of orders by update time (reconciliation).
type UpdatedQuery struct {
	Status Status // "" = every status
	From   time.Time
	To     time.Time
	After  *UpdatedKey // nil = from From
	Limit  int
}

// Tokens is the submit-token store (internal/platform/idempotency.Store):
// read its doc.go for the meaning of each outcome and error.
type Tokens interface {
	Issue(ctx context.Context, user string) (idempotency.Token, error)
	Claim(ctx context.Context, user, token, bodyHash string) (idempotency.Claim, error)
	Finish(ctx context.Context, token, leaseID, orderID string) error
	Release(ctx context.Context, token, leaseID string) error
}
