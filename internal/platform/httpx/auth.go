package httpx

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/ids"
)

// UserIDHeader carries the caller's identity, set by the API gateway in front.
const UserIDHeader = "X-User-ID"

const maxUserIDLen = 64

type userIDKey struct{}

// BearerAuth admits a request only with "Authorization: Bearer <token>"; any
// other request answers 401 unauthenticated with WWW-Authenticate: Bearer and
// the rest of the chain (the handler) does not run. Comparing SHA-256 digests
// in constant time keeps both the token's content and its length from leaking
// through timing. An empty token is a wiring mistake that would admit
// "Bearer " and panics.
func BearerAuth(token string) gin.HandlerFunc {
	if token == "" {
		panic("httpx: BearerAuth with an empty token")
	}
	want := sha256.Sum256([]byte(token))
	return func(c *gin.Context) {
		scheme, got, ok := strings.Cut(c.GetHeader("Authorization"), " ")
		// Hash even when the header is malformed so a missing scheme takes the
		// same path as a wrong token.
		sum := sha256.Sum256([]byte(got))
		match := subtle.ConstantTimeCompare(sum[:], want[:]) == 1
		// RFC 9110: the scheme is case-insensitive.
		if !ok || !strings.EqualFold(scheme, "Bearer") || !match {
			c.Header("WWW-Authenticate", "Bearer")
			Error(c, apperr.New(apperr.Unauthenticated, "A valid internal bearer token is required."))
			return
		}
		c.Next()
	}
}

// RequireUser admits a request only with a well-formed X-User-ID (1–64 of
// [A-Za-z0-9_.:-]) and stores it for UserID; otherwise it answers 401
// unauthenticated and the handler does not run.
func RequireUser() gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := UserID(c)
		if err != nil {
			Error(c, err)
			return
		}
		c.Set(userIDKey{}, id)
		c.Next()
	}
}

// UserID returns the caller's user id: the one RequireUser stored, or else the
// header, validated. The error is a 401 unauthenticated *apperr.Error. The
// charset keeps ids safe to use in Redis keys and logs as they are.
func UserID(c *gin.Context) (string, error) {
	if v, ok := c.Get(userIDKey{}); ok {
		return v.(string), nil
	}
	id := c.GetHeader(UserIDHeader)
	if id == "" {
		return "", apperr.New(apperr.Unauthenticated, "The X-User-ID header is required.")
	}
	if !ids.IsRef(id, maxUserIDLen) {
		return "", apperr.New(apperr.Unauthenticated, "The X-User-ID header is malformed.")
	}
	return id, nil
}
