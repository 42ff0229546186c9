// Package apperr is the one application error type of onceonly: an error with a
// stable, snake_case Code that clients may branch on. Domain packages return it
// (or wrap it); the HTTP adapter maps Code to a status through one table
// (httpx), using errors.As so that wrapping never turns a client's mistake into
// a 500.
package apperr

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error identifier. It is part of the public
// contract: never rename one.
type Code string

// Codes shared by every service (DESIGN.md, "HTTP contract").
const (
	Unauthenticated       Code = "unauthenticated"
	NotFound              Code = "not_found"
	MethodNotAllowed      Code = "method_not_allowed"
	BodyTooLarge          Code = "body_too_large"
	InvalidJSON           Code = "invalid_json"
	InvalidRequest        Code = "invalid_request"
	RateLimited           Code = "rate_limited"
	DependencyUnavailable Code = "dependency_unavailable"
	Internal              Code = "internal"
)

// Codes of the order and payment APIs (DESIGN.md, the service tables).
const (
	TooManyTokens            Code = "too_many_tokens"
	IdempotencyKeyMissing    Code = "idempotency_key_missing"
	IdempotencyKeyInvalid    Code = "idempotency_key_invalid"
	IdempotencyKeyInUse      Code = "idempotency_key_in_use"
	IdempotencyKeyReused     Code = "idempotency_key_reused"
	InvalidTransition        Code = "invalid_transition"
	PaymentMismatch          Code = "payment_mismatch"
	AmountMismatch           Code = "amount_mismatch"
	ReconciliationInProgress Code = "reconciliation_in_progress"
)

// Error is an application error. Detail is shown to the client, so it must
// never carry internal information; Err is the cause, logged but not shown.
type Error struct {
	Code   Code
	Detail string
	Err    error
}

// New returns an *Error with a client-facing detail message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with a client-facing detail and an internal cause.
func Wrap(err error, code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...), Err: err}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: X}) match any *Error with code X.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && t.Detail == "" && t.Err == nil
	}
	return false
}

// CodeOf returns the Code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}
