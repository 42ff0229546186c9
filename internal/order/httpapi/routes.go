// Package httpapi is the order service's HTTP adapter: gin handlers that
// turn requests into calls on order.Service and its answers into the exact
// responses of DESIGN.md's "order service" table. Errors travel as
// *apperr.Error and are written by httpx.Error (one code → status table).
//
//	POST /v1/orders/tokens            201 {token, expires_at}; 429 too_many_tokens; 503
//	POST /v1/orders                   201 order; 200 replay + Idempotent-Replayed: true;
//	                                  400 idempotency_key_missing|idempotency_key_invalid|
//	                                  invalid_json|invalid_request; 409 idempotency_key_in_use;
//	                                  413; 422 idempotency_key_reused; 503
//	GET  /v1/orders/{id}              200 order; 404
//	GET  /v1/orders?status&limit&cursor  200 {orders, next_cursor}; 400 invalid_request
//	POST /v1/orders/{id}/cancel       200 order (CANCELLED); 404; 409 invalid_transition
//	POST /v1/orders/{id}/pay          201 new / 200 existing {payment_id, order_id, status,
//	                                  amount_cents, currency}; 404; 409 invalid_transition|
//	                                  payment_mismatch; 503 (payment service or database)
//	every /v1/ route                  401 without X-User-ID; 429 rate_limited + Retry-After
//	POST /internal/v1/orders/batch-get  200 {orders}; 400 (> 500 ids); 401 without the token
//	GET  /internal/v1/orders?status&updated_from&updated_to&cursor&limit  200 {orders, next_cursor}
package httpapi

import (
	"context"
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/httpx"
	"github.com/onceonly/onceonly/internal/platform/ratelimit"
)

// Limiter decides whether a user's request may proceed
// (*ratelimit.Limiter). Allow must be safe for concurrent use and must
// always decide: it has no error to return.
type Limiter interface {
	Allow(ctx context.Context, user string) ratelimit.Decision
}

// Deps are what the routes need.
type Deps struct {
	Service *order.Service
	// Limiter limits every /v1/ route per user (after the user is known).
	Limiter Limiter
	// InternalToken guards /internal/ (INTERNAL_API_TOKEN); it must not be
	// empty.
	InternalToken string
}

// Routes registers the order API on r.
func Routes(r gin.IRouter, d Deps) error {
	if d.Service == nil || d.Limiter == nil || d.InternalToken == "" {
		return errors.New("httpapi: Routes needs a Service, a Limiter and an internal token")
	}
	h := handlers{svc: d.Service}

	// The user is established before the limiter runs: the limit is per user,
	// and a request without one is refused (401) without spending any quota.
	v1 := r.Group("/v1", httpx.RequireUser(), RateLimit(d.Limiter))
	v1.POST("/orders/tokens", h.issueToken)
	v1.POST("/orders", h.submit)
	v1.GET("/orders", h.list)
	v1.GET("/orders/:id", h.get)
	v1.POST("/orders/:id/cancel", h.cancel)
	v1.POST("/orders/:id/pay", h.pay)

	internal := r.Group("/internal/v1", httpx.BearerAuth(d.InternalToken))
	internal.POST("/orders/batch-get", h.batchGet)
	internal.GET("/orders", h.listUpdated)
	return nil
}

type handlers struct {
	svc *order.Service
}
