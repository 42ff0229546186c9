package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// Bounds of a sandbox completion.
const (
	MaxCopies   = 1000
	maxParallel = 100 // callbacks in flight at once
	// deliverTimeout bounds one completion's deliveries, whatever the
	// caller does: a gateway finishes its sends even if nobody watches.
	deliverTimeout = 60 * time.Second
)

// Routes registers the sandbox on r (no bearer token: it plays the gateway,
// which has none). Register it only while the simulator is the gateway.
//
//	POST /v1/sandbox/payments/{id}/complete  {"status","copies","deliver"}
//	  200 {payment_id, status, gateway_txn_id, copies, deliver, responses, results}
//	  400 invalid_json | invalid_request; 404 not_found; 503 dependency_unavailable
func (s *Simulator) Routes(r gin.IRouter) {
	r.POST("/v1/sandbox/payments/:id/complete", s.complete)
}

// completeBody is the sandbox's input (strict JSON: unknown fields are 400).
type completeBody struct {
	Status  string `json:"status"`
	Copies  *int   `json:"copies"`
	Deliver *bool  `json:"deliver"`
}

// Completion is the sandbox's answer: what was recorded, and how the service
// answered the callbacks — responses by HTTP status ("200": 5), results by
// result or problem code ("processed": 1, "duplicate": 4); a callback that
// got no answer counts as "error" in both.
type Completion struct {
	PaymentID    string         `json:"payment_id"`
	Status       string         `json:"status"`
	GatewayTxnID string         `json:"gateway_txn_id"`
	Copies       int            `json:"copies"`
	Deliver      bool           `json:"deliver"`
	Responses    map[string]int `json:"responses"`
	Results      map[string]int `json:"results"`
}

func (s *Simulator) complete(c *gin.Context) {
	var b completeBody
	if err := httpx.BindJSON(c, &b); err != nil {
		httpx.Error(c, err)
		return
	}
	st := payment.Status(b.Status)
	copies, deliver := 1, true
	if b.Copies != nil {
		copies = *b.Copies
	}
	if b.Deliver != nil {
		deliver = *b.Deliver
	}
	switch {
	case st != payment.Succeeded && st != payment.Failed:
		httpx.Error(c, apperr.New(apperr.InvalidRequest, "status must be SUCCEEDED or FAILED."))
		return
	case copies < 1 || copies > MaxCopies:
		httpx.Error(c, apperr.New(apperr.InvalidRequest, "copies must be 1 to %d; got %d.", MaxCopies, copies))
		return
	}
	ctx := c.Request.Context()
	p, err := s.pays.Get(ctx, c.Param("id"))
	if err != nil {
		httpx.Error(c, err)
		return
	}
	out, err := s.Settle(ctx, p, st)
	if err != nil {
		httpx.Error(c, apperr.Wrap(err, apperr.DependencyUnavailable, "The gateway simulator could not record the outcome."))
		return
	}
	res := Completion{PaymentID: payment.FormatID(p.ID), Status: string(st), GatewayTxnID: out.GatewayTxnID,
		Copies: copies, Deliver: deliver, Responses: map[string]int{}, Results: map[string]int{}}
	if deliver {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliverTimeout)
		res.Responses, res.Results = s.Deliver(dctx, p, out, copies, httpx.RequestID(c))
		cancel()
	}
	httpx.JSON(c, http.StatusOK, res)
}

// Deliver sends copies identical signed callbacks of outcome for p to the
// service, concurrently (as a gateway retrying, or duplicating, would), and
// counts the answers by HTTP status and by result. requestID, if set, is
// sent as X-Request-ID so the events the callbacks cause can be traced.
func (s *Simulator) Deliver(ctx context.Context, p payment.Payment, o payment.Outcome, copies int, requestID string) (responses, results map[string]int) {
	body, _ := json.Marshal(map[string]any{
		"payment_id": payment.FormatID(p.ID), "gateway_txn_id": o.GatewayTxnID, "status": string(o.Status),
		"amount_cents": p.AmountCents, "currency": p.Currency,
	})
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig := payment.Sign(s.secret, ts, body)

	responses, results = map[string]int{}, map[string]int{}
	var mu sync.Mutex
	jobs := make(chan struct{}, copies)
	for range copies {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	for range min(copies, maxParallel) {
		wg.Go(func() {
			for range jobs {
				status, result := s.send(ctx, body, ts, sig, requestID)
				mu.Lock()
				responses[status]++
				results[result]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return responses, results
}

// send posts one callback and names its answer.
func (s *Simulator) send(ctx context.Context, body []byte, ts, sig, requestID string) (status, result string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return "error", "error"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(payment.TimestampHeader, ts)
	req.Header.Set(payment.SignatureHeader, sig)
	if requestID != "" {
		req.Header.Set(httpx.RequestIDHeader, requestID)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.log.WarnContext(ctx, "gateway simulator: callback not answered", "err", err)
		return "error", "error"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var ans struct {
		Result string `json:"result"`
		Code   string `json:"code"`
	}
	_ = json.Unmarshal(b, &ans)
	result = ans.Result
	if result == "" {
		result = ans.Code
	}
	if result == "" {
		result = "unknown"
	}
	return strconv.Itoa(resp.StatusCode), result
}
