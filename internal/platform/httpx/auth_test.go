package httpx

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestBearerAuth_OnlyTheRightTokenRunsTheHandler(t *testing.T) {
	t.Parallel()
	const token = "s3cret-internal-token"
	cases := []struct {
		name, header string
		ok           bool
	}{
		{"missing", "", false},
		{"wrong token, same length", "Bearer " + strings.Repeat("x", len(token)), false},
		{"wrong length, prefix of the token", "Bearer " + token[:len(token)-1], false},
		{"wrong length, token plus suffix", "Bearer " + token + "x", false},
		{"other scheme", "Basic " + token, false},
		{"no scheme", token, false},
		{"scheme only", "Bearer", false},
		{"empty token", "Bearer ", false},
		{"double space", "Bearer  " + token, false},
		{"right", "Bearer " + token, true},
		{"scheme is case-insensitive", "bearer " + token, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ran atomic.Bool
			e := newTestEngine(t)
			e.POST("/v1/payments", BearerAuth(token), func(c *gin.Context) { ran.Store(true); c.Status(http.StatusCreated) })
			var headers []string
			if tc.header != "" {
				headers = []string{"Authorization", tc.header}
			}
			rec := do(t, e, "POST", "/v1/payments", nil, headers...)
			if tc.ok {
				if rec.Code != http.StatusCreated || !ran.Load() {
					t.Errorf("status %d, handler ran %v; want 201 and the handler run", rec.Code, ran.Load())
				}
				return
			}
			mustProblemBody(t, rec, http.StatusUnauthorized, "unauthenticated")
			if ran.Load() {
				t.Error("handler ran without a valid token")
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != "Bearer" {
				t.Errorf("WWW-Authenticate = %q, want Bearer", got)
			}
		})
	}
}

func TestBearerAuth_EmptyConfiguredTokenPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("BearerAuth(\"\") returned a middleware that would accept \"Bearer \"")
		}
	}()
	BearerAuth("")
}

func TestRequireUser_AdmitsOnlyAWellFormedUserID(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	e.GET("/v1/orders", RequireUser(), func(c *gin.Context) {
		id, err := UserID(c)
		if err != nil {
			Error(c, err)
			return
		}
		c.String(http.StatusOK, id)
	})
	cases := []struct {
		name, id string
		ok       bool
	}{
		{"missing", "", false},
		{"65 characters", strings.Repeat("u", 65), false},
		{"space", "user 1", false},
		{"slash", "user/1", false},
		{"non-ASCII", "üser", false},
		{"64 characters", strings.Repeat("u", 64), true},
		{"every allowed character", "AZaz09_.:-", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var headers []string
			if tc.id != "" {
				headers = []string{UserIDHeader, tc.id}
			}
			rec := do(t, e, "GET", "/v1/orders", nil, headers...)
			if !tc.ok {
				mustProblemBody(t, rec, http.StatusUnauthorized, "unauthenticated")
				return
			}
			if rec.Code != http.StatusOK || rec.Body.String() != tc.id {
				t.Errorf("got %d %q, want 200 %q", rec.Code, rec.Body, tc.id)
			}
		})
	}
}
