package httpx

import (
	"context"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// RequestIDHeader carries the request id in both directions.
const RequestIDHeader = "X-Request-ID"

const maxRequestIDLen = 128

type requestIDKey struct{}

type loggerKey struct{}

// requestID accepts a caller's id so one trace spans services, and otherwise
// mints one. The header is set before anything else runs so that every later
// outcome (404, 413, panic) carries it.
func requestID(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(RequestIDHeader)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		c.Header(RequestIDHeader, id)
		c.Set(requestIDKey{}, id)
		c.Set(loggerKey{}, log.With(slog.String("request_id", id)))
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), requestIDKey{}, id))
		c.Next()
	}
}

// validRequestID keeps ids to a charset that is safe in logs, headers and
// Kafka headers, and bounded in size.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '-':
		default:
			return false
		}
	}
	return true
}

// RequestID returns the id of the request c is serving, or "" outside an
// engine built by NewEngine.
func RequestID(c *gin.Context) string {
	if v, ok := c.Get(requestIDKey{}); ok {
		return v.(string)
	}
	return ""
}

// RequestIDFrom returns the request id carried by ctx (a request's context, a
// context derived from it, or the *gin.Context itself), or "" if there is none.
func RequestIDFrom(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithRequestID returns ctx carrying id, for work that continues a request
// outside its handler (a job it triggered, a test).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// Logger returns the engine's logger with the request id attached, or
// slog.Default() outside an engine built by NewEngine.
func Logger(c *gin.Context) *slog.Logger {
	if v, ok := c.Get(loggerKey{}); ok {
		return v.(*slog.Logger)
	}
	return slog.Default()
}
