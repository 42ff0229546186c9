package httpx

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// DefaultMaxBody is the request body limit of the HTTP contract.
const DefaultMaxBody int64 = 64 << 10

// Options configures NewEngine.
type Options struct {
	// Logger receives access logs, panics and unexpected errors; its handler
	// decides the format (JSON in the services). Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the onceonly_http_* series. Nil leaves them
	// unregistered.
	Registerer prometheus.Registerer
	// MaxBody caps every request body in bytes. Zero or less means
	// DefaultMaxBody.
	MaxBody int64
}

var releaseMode sync.Once

// NewEngine returns a gin engine with, in order: request id, panic recovery,
// access log, metrics, body limit. Unknown routes answer 404 not_found and
// known routes with another method 405 method_not_allowed, both as problems
// that went through the same middleware (so they too carry X-Request-ID and
// are counted).
func NewEngine(o Options) *gin.Engine {
	// gin's mode is process-wide; setting it once keeps parallel engines (the
	// demo, tests) from racing on it and silences gin's debug route dump.
	releaseMode.Do(func() { gin.SetMode(gin.ReleaseMode) })
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}

	e := gin.New()
	// The services sit behind a gateway we do not configure here; trusting no
	// proxy means X-Forwarded-For cannot spoof the client address in logs.
	if err := e.SetTrustedProxies(nil); err != nil {
		panic(fmt.Sprintf("httpx: trusted proxies: %v", err))
	}
	// gin answers trailing-slash and case mismatches with a redirect that runs
	// before any middleware: no request id, no problem body, and a POST turned
	// into a redirect. Exact paths only; the rest is a 404 problem.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	// Handlers may pass the *gin.Context as a context.Context: with fallback it
	// carries the request's cancellation and request id.
	e.ContextWithFallback = true

	e.Use(
		requestID(o.Logger),
		recovery(),
		accessLog(),
		newHTTPMetrics(o.Registerer).middleware(),
		bodyLimit(o.MaxBody),
	)
	e.NoRoute(func(c *gin.Context) {
		Error(c, apperr.New(apperr.NotFound, "No such resource."))
	})
	e.NoMethod(func(c *gin.Context) {
		Error(c, apperr.New(apperr.MethodNotAllowed, "Method %s is not allowed on this resource.", safeMethod(c.Request.Method)))
	})
	return e
}

func safeMethod(m string) string {
	if knownMethods[m] {
		return m
	}
	return "OTHER"
}

type maxBodyKey struct{}

// bodyLimit rejects a declared oversize body before reading a byte of it, and
// wraps the body so an undeclared (chunked) one fails at the limit while it is
// read. Handlers see the overflow as *http.MaxBytesError, which ReadBody and
// Error both turn into 413.
func bodyLimit(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Set(maxBodyKey{}, limit)
		if c.Request.ContentLength > limit {
			Error(c, apperr.New(apperr.BodyTooLarge, "%s", tooLargeDetail(limit)))
			return
		}
		if c.Request.Body != nil && c.Request.Body != http.NoBody {
			c.Request.Body = http.MaxBytesReader(unwrapWriter(c.Writer), c.Request.Body, limit)
		}
		c.Next()
	}
}

// unwrapWriter reaches net/http's own writer: MaxBytesReader tells it, and only
// it, to close the connection after the 413 instead of draining the rest of an
// oversize upload.
func unwrapWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

func tooLargeDetail(limit int64) string {
	return fmt.Sprintf("Request body exceeds %d bytes.", limit)
}
