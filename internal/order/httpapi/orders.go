package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// Headers of the submit contract.
const (
	IdempotencyKeyHeader     = "Idempotency-Key"
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// user is the caller's id; RequireUser has already refused requests without one.
func user(c *gin.Context) (string, bool) {
	u, err := httpx.UserID(c)
	if err != nil {
		httpx.Error(c, err)
		return "", false
	}
	return u, true
}

// POST /v1/orders/tokens: an empty body or {} (nothing else).
func (h handlers) issueToken(c *gin.Context) {
	u, ok := user(c)
	if !ok {
		return
	}
	if err := httpx.BindOptionalJSON(c, nil); err != nil {
		httpx.Error(c, err)
		return
	}
	tok, err := h.svc.IssueToken(c.Request.Context(), u)
	if err != nil {
		httpx.Error(c, err)
		return
	}
	httpx.JSON(c, http.StatusCreated, tokenJSON{Token: tok.Value, ExpiresAt: timeJSON(tok.ExpiresAt)})
}

// POST /v1/orders with Idempotency-Key.
func (h handlers) submit(c *gin.Context) {
	u, ok := user(c)
	if !ok {
		return
	}
	key := c.GetHeader(IdempotencyKeyHeader)
	var body submitBody
	// A missing key is the first thing to fix, whatever the body: Submit
	// answers it before looking at the body.
	if err := httpx.BindJSON(c, &body); err != nil && key != "" {
		httpx.Error(c, h.svc.RejectSubmit(err))
		return
	}
	o, replayed, err := h.svc.Submit(c.Request.Context(), u, key, body.toDomain())
	if err != nil {
		httpx.Error(c, err)
		return
	}
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
		c.Header(IdempotentReplayedHeader, "true")
	}
	c.Header("Location", "/v1/orders/"+order.FormatID(o.ID))
	httpx.JSON(c, status, toJSON(o))
}

// GET /v1/orders/{id}
func (h handlers) get(c *gin.Context) {
	u, ok := user(c)
	if !ok {
		return
	}
	o, err := h.svc.Get(c.Request.Context(), u, c.Param("id"))
	if err != nil {
		httpx.Error(c, err)
		return
	}
	httpx.JSON(c, http.StatusOK, toJSON(o))
}

// GET /v1/orders?status=&limit=&cursor=
func (h handlers) list(c *gin.Context) {
	u, ok := user(c)
	if !ok {
		return
	}
	p, err := h.svc.List(c.Request.Context(), order.ListRequest{
		UserID: u, Status: c.Query("status"), Limit: c.Query("limit"), Cursor: c.Query("cursor"),
	})
	if err != nil {
		httpx.Error(c, err)
		return
	}
	out := listJSON{Orders: make([]orderJSON, len(p.Orders)), NextCursor: cursor(p.NextCursor)}
	for i, o := range p.Orders {
		out.Orders[i] = toJSON(o)
	}
	httpx.JSON(c, http.StatusOK, out)
}

// POST /v1/orders/{id}/cancel: an empty body or {} (nothing else).
func (h handlers) cancel(c *gin.Context) {
	u, ok := user(c)
	if !ok {
		return
	}
	if err := httpx.BindOptionalJSON(c, nil); err != nil {
		httpx.Error(c, err)
		return
	}
	o, err := h.svc.Cancel(c.Request.Context(), u, c.Param("id"))
	if err != nil {
		httpx.Error(c, err)
		return
	}
	httpx.JSON(c, http.StatusOK, toJSON(o))
}

// POST /v1/orders/{id}/pay: an empty body or {} (nothing else).
func (h handlers) pay(c *gin.Context) {
	u, ok := user(c)
	if !ok {
		return
	}
	if err := httpx.BindOptionalJSON(c, nil); err != nil {
		httpx.Error(c, err)
		return
	}
	p, created, err := h.svc.Pay(c.Request.Context(), u, c.Param("id"))
	if err != nil {
		httpx.Error(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpx.JSON(c, status, payJSON{PaymentID: p.ID, OrderID: c.Param("id"), Status: p.Status,
		AmountCents: p.AmountCents, Currency: p.Currency})
}
