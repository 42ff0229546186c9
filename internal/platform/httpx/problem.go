package httpx

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// ProblemContentType is the media type of every error body (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypeBase prefixes the "type" member: each code is its own problem
// type, so a client may branch on either "type" or "code".
const ProblemTypeBase = "https://onceonly.dev/problems/"

// InternalDetail is all a client learns about an unexpected failure.
const InternalDetail = "Internal error."

type problemKind struct {
	status int
	title  string
}

// problemKinds is the one table from code to HTTP status. A code missing here
// is answered as a 500 "internal" (TestProblemTable_CoversEveryApperrCode keeps
// it complete).
var problemKinds = map[apperr.Code]problemKind{
	apperr.Unauthenticated:          {http.StatusUnauthorized, "Unauthenticated"},
	apperr.NotFound:                 {http.StatusNotFound, "Not found"},
	apperr.MethodNotAllowed:         {http.StatusMethodNotAllowed, "Method not allowed"},
	apperr.BodyTooLarge:             {http.StatusRequestEntityTooLarge, "Request body too large"},
	apperr.InvalidJSON:              {http.StatusBadRequest, "Invalid JSON"},
	apperr.InvalidRequest:           {http.StatusBadRequest, "Invalid request"},
	apperr.RateLimited:              {http.StatusTooManyRequests, "Rate limited"},
	apperr.DependencyUnavailable:    {http.StatusServiceUnavailable, "Dependency unavailable"},
	apperr.Internal:                 {http.StatusInternalServerError, "Internal error"},
	apperr.TooManyTokens:            {http.StatusTooManyRequests, "Too many unused tokens"},
	apperr.IdempotencyKeyMissing:    {http.StatusBadRequest, "Idempotency key missing"},
	apperr.IdempotencyKeyInvalid:    {http.StatusBadRequest, "Idempotency key invalid"},
	apperr.IdempotencyKeyInUse:      {http.StatusConflict, "Idempotency key in use"},
	apperr.IdempotencyKeyReused:     {http.StatusUnprocessableEntity, "Idempotency key reused"},
	apperr.InvalidTransition:        {http.StatusConflict, "Invalid state transition"},
	apperr.PaymentMismatch:          {http.StatusConflict, "Payment mismatch"},
	apperr.AmountMismatch:           {http.StatusUnprocessableEntity, "Amount mismatch"},
	apperr.ReconciliationInProgress: {http.StatusConflict, "Reconciliation in progress"},
}

// StatusOf returns the HTTP status of code, or 500 for a code not in the table.
func StatusOf(code apperr.Code) int {
	if k, ok := problemKinds[code]; ok {
		return k.status
	}
	return http.StatusInternalServerError
}

// Problem is an RFC 9457 problem details object. Extensions adds members such
// as readiness "checks"; a key that collides with a standard member is dropped,
// so an extension can never rewrite the status or code a client branches on.
type Problem struct {
	Type       string
	Title      string
	Status     int
	Detail     string
	Code       apperr.Code
	Extensions map[string]any
}

// MarshalJSON writes the standard members first, then the extensions sorted by
// key, so bodies are byte-stable for tests and caches.
func (p Problem) MarshalJSON() ([]byte, error) {
	std := struct {
		Type   string      `json:"type"`
		Title  string      `json:"title"`
		Status int         `json:"status"`
		Detail string      `json:"detail"`
		Code   apperr.Code `json:"code"`
	}{p.Type, p.Title, p.Status, p.Detail, p.Code}
	b, err := json.Marshal(std)
	if err != nil || len(p.Extensions) == 0 {
		return b, err
	}
	keys := make([]string, 0, len(p.Extensions))
	for k := range p.Extensions {
		switch k {
		case "type", "title", "status", "detail", "code":
		default:
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	b = b[:len(b)-1] // reopen the object
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(p.Extensions[k])
		if err != nil {
			return nil, err
		}
		b = append(append(append(append(b, ','), kb...), ':'), vb...)
	}
	return append(b, '}'), nil
}

// ProblemOf translates err into the problem a client sees, and reports whether
// the error is unexpected (not an *apperr.Error with a known code). The detail
// of a 500 is always InternalDetail: an *apperr.Error with code internal may
// still carry text meant for the log.
func ProblemOf(err error) (p Problem, unexpected bool) {
	code, detail := apperr.Internal, InternalDetail
	var ae *apperr.Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		if _, known := problemKinds[ae.Code]; known {
			code, detail = ae.Code, ae.Detail
		} else {
			unexpected = true
		}
	case errors.As(err, &mbe):
		// A handler that read the body itself still answers 413, not 500.
		code, detail = apperr.BodyTooLarge, tooLargeDetail(mbe.Limit)
	default:
		unexpected = true
	}
	k := problemKinds[code]
	if k.status == http.StatusInternalServerError {
		detail = InternalDetail
	}
	if detail == "" {
		detail = k.title + "."
	}
	return Problem{Type: ProblemTypeBase + string(code), Title: k.title, Status: k.status, Detail: detail, Code: code}, unexpected
}

// Error answers the request with the problem for err and aborts the handler
// chain. Unexpected errors and every 5xx are logged at ERROR with their cause
// and the request id; 4xx are the client's business and are not.
func Error(c *gin.Context, err error) { ErrorWith(c, err, nil) }

// ErrorWith is Error with extra problem members (for example readiness checks).
func ErrorWith(c *gin.Context, err error, ext map[string]any) {
	p, unexpected := ProblemOf(err)
	p.Extensions = ext
	if unexpected || p.Status >= http.StatusInternalServerError {
		msg := "request failed"
		if unexpected {
			msg = "unexpected error"
		}
		Logger(c).LogAttrs(c.Request.Context(), slog.LevelError, msg,
			slog.String("code", string(p.Code)), slog.Any("error", err))
	}
	WriteProblem(c, p)
}

// WriteProblem writes p as the response and aborts the handler chain. If the
// response has already started it only logs, since a second status line would
// corrupt the one the client is reading.
func WriteProblem(c *gin.Context, p Problem) {
	c.Abort()
	c.Set(problemCodeKey{}, p.Code)
	if c.Writer.Written() {
		Logger(c).LogAttrs(c.Request.Context(), slog.LevelError, "problem after response started",
			slog.String("code", string(p.Code)), slog.Int("status", p.Status))
		return
	}
	b, err := json.Marshal(p)
	if err != nil {
		// Only an unmarshalable extension gets here; drop the extensions rather
		// than answer with no body.
		p.Extensions = nil
		b, _ = json.Marshal(p)
	}
	c.Data(p.Status, ProblemContentType, b)
}

// JSON writes v as an application/json response. A value that cannot be
// encoded becomes a 500 problem instead of a half-written 200.
func JSON(c *gin.Context, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Error(c, err)
		return
	}
	c.Data(status, "application/json; charset=utf-8", b)
}

type problemCodeKey struct{}

// problemCode returns the code of the problem written for c, if any.
func problemCode(c *gin.Context) string {
	if v, ok := c.Get(problemCodeKey{}); ok {
		return string(v.(apperr.Code))
	}
	return ""
}
