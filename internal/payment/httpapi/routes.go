// Package httpapi is the payment service's HTTP adapter: gin handlers that
// turn requests into calls on payment.Service and its answers into the exact
// responses of DESIGN.md's "payment service" table. Errors travel as
// *apperr.Error and are written by httpx.Error (one code → status table).
//
//	POST /v1/payments            (internal token) 201 new / 200 the order's live payment;
//	                             400 invalid_json|invalid_request; 409 payment_mismatch|
//	                             invalid_transition (after a refund); 413; 503
//	GET  /v1/payments/{id}       (internal token) 200 payment; 404
//	POST /v1/payments/callback   (HMAC-signed, no token) 200 {"result":"processed"|
//	                             "duplicate"|"conflict"}; 401 unsigned, forged or stale;
//	                             400 invalid_json|invalid_request; 404; 413;
//	                             422 amount_mismatch; 503
//	POST /v1/reconciliations     (internal token) 200 report (also of a failed run);
//	                             400 for a body other than empty or {};
//	                             409 reconciliation_in_progress; 503
//	GET  /v1/reconciliations/latest  (internal token) 200 report; 404 before the first run
//	every internal route         401 unauthenticated without the bearer token; nothing runs
//
// The sandbox (POST /v1/sandbox/payments/{id}/complete) belongs to the gateway
// simulator (internal/payment/gateway) and is mounted only with it.
package httpapi

import (
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// Deps are what the routes need.
type Deps struct {
	Service *payment.Service
	// InternalToken guards every route but the callback
	// (INTERNAL_API_TOKEN); it must not be empty.
	InternalToken string
	// Reconciler, if set, serves /v1/reconciliations (nil: the routes are
	// not registered — a service mounted without the order service or the
	// lock).
	Reconciler *reconcile.Reconciler
}

// Routes registers the payment API on r.
func Routes(r gin.IRouter, d Deps) error {
	if d.Service == nil || d.InternalToken == "" {
		return errors.New("httpapi: Routes needs a Service and an internal token")
	}
	h := handlers{svc: d.Service, rec: d.Reconciler}
	internal := httpx.BearerAuth(d.InternalToken)
	r.POST("/v1/payments", internal, h.create)
	r.GET("/v1/payments/:id", internal, h.get)
	// The gateway has no bearer token: the HMAC signature is its credential,
	// checked by the handler before the body is parsed.
	r.POST("/v1/payments/callback", h.callback)
	if d.Reconciler != nil {
		r.POST("/v1/reconciliations", internal, h.reconcileNow)
		r.GET("/v1/reconciliations/latest", internal, h.latestReconciliation)
	}
	return nil
}

type handlers struct {
	svc *payment.Service
	rec *reconcile.Reconciler
}
