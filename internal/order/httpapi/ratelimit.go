package httpapi

import (
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// RateLimit admits a request only if lim allows one more for its user (set
// by httpx.RequireUser, which must run first); otherwise it answers 429
// rate_limited with Retry-After in whole seconds (at least 1) and the handler
// does not run. The limiter always decides, Redis or not (see
// internal/platform/ratelimit): a dead Redis narrows the limit, never lifts it.
func RateLimit(lim Limiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		user, err := httpx.UserID(c)
		if err != nil {
			httpx.Error(c, err)
			return
		}
		d := lim.Allow(c.Request.Context(), user)
		if d.Allowed {
			c.Next()
			return
		}
		secs := d.RetryAfterSeconds()
		c.Header("Retry-After", strconv.Itoa(secs))
		httpx.Error(c, apperr.New(apperr.RateLimited,
			"Too many requests for this user; retry after %d s.", secs))
	}
}
