package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// batchGetBody is POST /internal/v1/orders/batch-get's body.
type batchGetBody struct {
	IDs []string `json:"ids"`
}

// POST /internal/v1/orders/batch-get {"ids":[...]}: the orders that exist,
// by id; unknown or malformed ids are simply absent; more than 500 is 400.
func (h handlers) batchGet(c *gin.Context) {
	var body batchGetBody
	if err := httpx.BindJSON(c, &body); err != nil {
		httpx.Error(c, err)
		return
	}
	found, err := h.svc.BatchGet(c.Request.Context(), body.IDs)
	if err != nil {
		httpx.Error(c, err)
		return
	}
	out := batchJSON{Orders: make([]internalJSON, len(found))}
	for i, o := range found {
		out.Orders[i] = toInternalJSON(o)
	}
	httpx.JSON(c, http.StatusOK, out)
}

// GET /internal/v1/orders?status=PAID&updated_from=&updated_to=&cursor=&limit=
func (h handlers) listUpdated(c *gin.Context) {
	p, err := h.svc.ListUpdated(c.Request.Context(), order.UpdatedRequest{
		Status: c.Query("status"), UpdatedFrom: c.Query("updated_from"), UpdatedTo: c.Query("updated_to"),
		Limit: c.Query("limit"), Cursor: c.Query("cursor"),
	})
	if err != nil {
		httpx.Error(c, err)
		return
	}
	out := internalListJSON{Orders: make([]internalJSON, len(p.Orders)), NextCursor: cursor(p.NextCursor)}
	for i, o := range p.Orders {
		out.Orders[i] = toInternalJSON(o)
	}
	httpx.JSON(c, http.StatusOK, out)
}
