package httpx

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// unmatchedRoute labels requests that matched no route (404, 405), so a
// scanner probing random paths adds no new label values or log keys.
const unmatchedRoute = "unmatched"

func routeOf(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return unmatchedRoute
}

// finalStatus is the status the client receives. While a panic unwinds the
// response is not written yet, and recovery (further out) will write a 500.
func finalStatus(c *gin.Context, completed bool) int {
	if !completed && !c.Writer.Written() {
		return http.StatusInternalServerError
	}
	return c.Writer.Status()
}

// accessLog writes one line per request. It logs from a deferred call so a
// panicking request is logged too, with the 500 recovery is about to send.
func accessLog() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		completed := false
		defer func() {
			status := finalStatus(c, completed)
			level := slog.LevelInfo
			if status >= http.StatusInternalServerError {
				level = slog.LevelWarn
			}
			attrs := []slog.Attr{
				slog.String("method", c.Request.Method),
				slog.String("route", routeOf(c)),
				slog.String("path", c.Request.URL.Path),
				slog.Int("status", status),
				slog.Duration("duration", time.Since(start)),
				slog.Int("bytes", max(c.Writer.Size(), 0)),
				slog.String("remote", c.ClientIP()),
			}
			if code := problemCode(c); code != "" {
				attrs = append(attrs, slog.String("code", code))
			}
			Logger(c).LogAttrs(c.Request.Context(), level, "http request", attrs...)
		}()
		c.Next()
		completed = true
	}
}
