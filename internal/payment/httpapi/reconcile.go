package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// reportJSON is a reconciliation report, exactly as DESIGN.md shows it:
// ids are strings, times RFC 3339 in UTC, error null on success, diffs
// never null (at most reconcile.MaxDiffs; the counts are always complete).
type reportJSON struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Error       *string    `json:"error"`
	WindowStart string     `json:"window_start"`
	WindowEnd   string     `json:"window_end"`
	Checked     int64      `json:"checked"`
	Matched     int64      `json:"matched"`
	Republished int64      `json:"republished"`
	Queried     int64      `json:"queried"`
	Refunded    int64      `json:"refunded"`
	Flagged     int64      `json:"flagged"`
	Diffs       []diffJSON `json:"diffs"`
}

// diffJSON is one difference; payment_id is null when no payment is
// involved (a PAID order without any).
type diffJSON struct {
	Kind      string  `json:"kind"`
	PaymentID *string `json:"payment_id"`
	OrderID   string  `json:"order_id"`
	Action    string  `json:"action"`
}

func toReportJSON(r reconcile.Report) reportJSON {
	out := reportJSON{
		ID: payment.FormatID(r.ID), Status: string(r.Status),
		WindowStart: timeJSON(r.WindowStart), WindowEnd: timeJSON(r.WindowEnd),
		Checked: r.Checked, Matched: r.Matched, Republished: r.Republished, Queried: r.Queried,
		Refunded: r.Refunded, Flagged: r.Flagged, Diffs: make([]diffJSON, len(r.Diffs)),
	}
	if r.Error != "" {
		e := r.Error
		out.Error = &e
	}
	for i, d := range r.Diffs {
		out.Diffs[i] = diffJSON{Kind: d.Kind, OrderID: d.OrderID, Action: d.Action}
		if d.PaymentID != 0 {
			id := payment.FormatID(d.PaymentID)
			out.Diffs[i].PaymentID = &id
		}
	}
	return out
}

// POST /v1/reconciliations (internal): runs reconciliation now, under the
// schedule's lock, and answers its report — 200 also when the run failed.
// The body is empty or {} (anything else is 400). 409
// reconciliation_in_progress while another run holds the lock; 503 when the
// lock cannot be decided or the report not stored.
func (h handlers) reconcileNow(c *gin.Context) {
	if err := httpx.BindOptionalJSON(c, nil); err != nil {
		httpx.Error(c, err)
		return
	}
	rep, err := h.rec.RunNow(c.Request.Context(), httpx.RequestID(c))
	if err != nil {
		httpx.Error(c, err)
		return
	}
	httpx.JSON(c, http.StatusOK, toReportJSON(rep))
}

// GET /v1/reconciliations/latest (internal): the last report; 404 before
// the first run.
func (h handlers) latestReconciliation(c *gin.Context) {
	rep, err := h.rec.Latest(c.Request.Context())
	if err != nil {
		httpx.Error(c, err)
		return
	}
	httpx.JSON(c, http.StatusOK, toReportJSON(rep))
}
