package httpx

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// recovery turns a panicking handler into a 500 problem so that one bad
// request costs one response, not the connection or the process, and the
// stack reaches the log rather than the client.
func recovery() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				// The documented way to abort a response: net/http drops the
				// connection quietly. Swallowing it would send a 500 instead.
				panic(p)
			}
			Logger(c).LogAttrs(c.Request.Context(), slog.LevelError, "panic serving request",
				slog.String("panic", fmt.Sprint(p)),
				slog.String("stack", string(debug.Stack())))
			if !c.Writer.Written() {
				// Headers the handler set for its success answer (Location,
				// Idempotent-Replayed, ...) must not leak onto the 500.
				h := c.Writer.Header()
				for k := range h {
					if k != http.CanonicalHeaderKey(RequestIDHeader) {
						delete(h, k)
					}
				}
			}
			WriteProblem(c, mustProblem(apperr.Internal))
		}()
		c.Next()
	}
}

func mustProblem(code apperr.Code) Problem {
	p, _ := ProblemOf(apperr.New(code, ""))
	return p
}
