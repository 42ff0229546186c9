package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// POST /v1/payments (internal): 201 when this call created the payment, 200
// with the order's live payment otherwise.
func (h handlers) create(c *gin.Context) {
	var body createBody
	if err := httpx.BindJSON(c, &body); err != nil {
		httpx.Error(c, err)
		return
	}
	p, created, err := h.svc.Create(c.Request.Context(), body.toDomain())
	if err != nil {
		httpx.Error(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.Header("Location", "/v1/payments/"+payment.FormatID(p.ID))
	httpx.JSON(c, status, toJSON(p))
}

// GET /v1/payments/{id} (internal)
func (h handlers) get(c *gin.Context) {
	p, err := h.svc.Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		httpx.Error(c, err)
		return
	}
	httpx.JSON(c, http.StatusOK, toJSON(p))
}

// POST /v1/payments/callback (the gateway; signed, no bearer token). The
// order of the checks is the contract: the signature and timestamp over the
// raw bytes first (401), and only then is the body parsed (400), looked up
// (404), compared (422) and applied.
func (h handlers) callback(c *gin.Context) {
	raw, err := httpx.ReadBody(c)
	if err != nil {
		httpx.Error(c, err)
		return
	}
	if err := h.svc.Authenticate(c.GetHeader(payment.TimestampHeader), c.GetHeader(payment.SignatureHeader), raw); err != nil {
		httpx.Error(c, err)
		return
	}
	var body callbackBody
	// BindJSONLenient decodes the very bytes ReadBody cached: what was
	// verified is what is decoded.
	if err := httpx.BindJSONLenient(c, &body); err != nil {
		httpx.Error(c, h.svc.RejectCallback(err))
		return
	}
	res, err := h.svc.ApplyCallback(c.Request.Context(), payment.Callback{
		PaymentID: body.PaymentID, GatewayTxnID: body.GatewayTxnID, Status: body.Status,
		AmountCents: body.AmountCents, Currency: body.Currency, Raw: raw, RequestID: httpx.RequestID(c),
	})
	if err != nil {
		httpx.Error(c, err)
		return
	}
	httpx.JSON(c, http.StatusOK, resultJSON{Result: res})
}
