package httpx

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// routedEngine has one route per outcome every response must survive.
func routedEngine(t *testing.T) *testEngine {
	t.Helper()
	e := newTestEngine(t)
	e.GET("/v1/orders/:id", func(c *gin.Context) { JSON(c, http.StatusOK, gin.H{"id": c.Param("id")}) })
	e.POST("/v1/orders", func(c *gin.Context) {
		var v struct{ Name string }
		if err := BindJSON(c, &v); err != nil {
			Error(c, err)
			return
		}
		JSON(c, http.StatusCreated, v)
	})
	e.GET("/panic", func(c *gin.Context) {
		c.Header("Location", "/should/not/leak")
		panic("handler bug")
	})
	return e
}

func TestRequestID_OnEveryResponse(t *testing.T) {
	t.Parallel()
	e := routedEngine(t)
	big := `{"name":"` + strings.Repeat("x", 70<<10) + `"}`
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"matched route", "GET", "/v1/orders/1", "", 200},
		{"unknown route", "GET", "/nope", "", 404},
		{"wrong method", "DELETE", "/v1/orders/1", "", 405},
		{"panic", "GET", "/panic", "", 500},
		{"body too large", "POST", "/v1/orders", big, 413},
		{"invalid json", "POST", "/v1/orders", "{", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := do(t, e, tc.method, tc.path, strings.NewReader(tc.body))
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d; %s", rec.Code, tc.status, rec.Body)
			}
			if id := rec.Header().Get(RequestIDHeader); !uuidRe.MatchString(id) {
				t.Errorf("X-Request-ID = %q, want a generated UUID", id)
			}
		})
	}
}

func TestRequestID_ValidIncomingIsEchoedInvalidReplaced(t *testing.T) {
	t.Parallel()
	e := routedEngine(t)
	cases := []struct {
		name, in string
		kept     bool
	}{
		{"simple", "req-42", true},
		{"all allowed characters", "AZaz09._-", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"129 characters", strings.Repeat("a", 129), false},
		{"space", "a b", false},
		{"newline (log injection)", "a\nlevel=ERROR", false},
		{"non-ASCII", "ré", false},
		{"slash", "a/b", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := do(t, e, "GET", "/v1/orders/1", nil, RequestIDHeader, tc.in).Header().Get(RequestIDHeader)
			if tc.kept && got != tc.in {
				t.Errorf("X-Request-ID = %q, want the incoming %q echoed", got, tc.in)
			}
			if !tc.kept && !uuidRe.MatchString(got) {
				t.Errorf("X-Request-ID = %q, want %q replaced by a UUID", got, tc.in)
			}
		})
	}
}

func TestRequestID_ReachesGinAndRequestContexts(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	e.GET("/x", func(c *gin.Context) {
		c.String(http.StatusOK, "%s|%s|%s", RequestID(c), RequestIDFrom(c.Request.Context()), RequestIDFrom(c))
	})
	rec := do(t, e, "GET", "/x", nil, RequestIDHeader, "abc.123")
	if want := "abc.123|abc.123|abc.123"; rec.Body.String() != want {
		t.Errorf("body = %q, want %q", rec.Body, want)
	}
}

func TestRecovery_PanicIs500AndEngineKeepsServing(t *testing.T) {
	t.Parallel()
	e := routedEngine(t)
	rec := do(t, e, "GET", "/panic", nil, RequestIDHeader, "panic-1")
	p := mustProblemBody(t, rec, http.StatusInternalServerError, "internal")
	if p.Detail != InternalDetail || strings.Contains(rec.Body.String(), "handler bug") {
		t.Errorf("panic value reached the client: %s", rec.Body)
	}
	if rec.Header().Get("Location") != "" {
		t.Errorf("header set before the panic leaked onto the 500: %v", rec.Header())
	}
	if got := rec.Header().Get(RequestIDHeader); got != "panic-1" {
		t.Errorf("X-Request-ID = %q after a panic", got)
	}
	logged := e.logs.find(t, "panic serving request")
	if len(logged) != 1 || !strings.Contains(fmt.Sprint(logged[0]["stack"]), "engine_test.go") || logged[0]["request_id"] != "panic-1" {
		t.Errorf("want the panic logged once with its stack and request id, logs:\n%s", e.logs)
	}

	if next := do(t, e, "GET", "/v1/orders/7", nil); next.Code != http.StatusOK || !strings.Contains(next.Body.String(), `"7"`) {
		t.Errorf("request after the panic: %d %s", next.Code, next.Body)
	}
	if got := counterValue(t, e.reg, "GET", "/panic", "500"); got != 1 {
		t.Errorf("panic counted %v times as 500, want 1", got)
	}
}

func TestRouting_UnknownRouteAndMethodAreProblems(t *testing.T) {
	t.Parallel()
	e := routedEngine(t)
	mustProblemBody(t, do(t, e, "GET", "/v2/whatever", nil), http.StatusNotFound, "not_found")
	// gin would redirect these by default, before any middleware runs.
	mustProblemBody(t, do(t, e, "GET", "/v1/orders/1/", nil), http.StatusNotFound, "not_found")
	mustProblemBody(t, do(t, e, "GET", "/V1/ORDERS/1", nil), http.StatusNotFound, "not_found")

	rec := do(t, e, "PUT", "/v1/orders", nil)
	mustProblemBody(t, rec, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := rec.Header().Get("Allow"); allow != "POST" {
		t.Errorf("Allow = %q, want POST", allow)
	}
}

func TestMetrics_LabelRoutesByTemplateNeverRawPath(t *testing.T) {
	t.Parallel()
	e := routedEngine(t)
	do(t, e, "GET", "/v1/orders/1", nil)
	do(t, e, "GET", "/v1/orders/2", nil)
	do(t, e, "GET", "/random/scan/path", nil)
	do(t, e, "BREW", "/v1/orders/1", nil)

	if got := counterValue(t, e.reg, "GET", "/v1/orders/:id", "200"); got != 2 {
		t.Errorf("GET /v1/orders/:id 200 = %v, want 2", got)
	}
	if got := counterValue(t, e.reg, "GET", unmatchedRoute, "404"); got != 1 {
		t.Errorf("unmatched 404 = %v, want 1", got)
	}
	if got := counterValue(t, e.reg, "OTHER", unmatchedRoute, "405"); got != 1 {
		t.Errorf("unknown method = %v, want 1 under method OTHER", got)
	}
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "/v1/orders/1") || strings.Contains(l.GetValue(), "random") {
					t.Errorf("%s has a raw path label %q", mf.GetName(), l.GetValue())
				}
			}
		}
		if mf.GetName() == "onceonly_http_request_duration_seconds" && len(mf.GetMetric()) == 0 {
			t.Errorf("duration histogram has no series")
		}
	}
}

func TestAccessLog_OneLinePerRequestWithRouteStatusAndID(t *testing.T) {
	t.Parallel()
	e := routedEngine(t)
	do(t, e, "GET", "/v1/orders/9", nil, RequestIDHeader, "log-1")
	do(t, e, "POST", "/v1/orders", strings.NewReader(`{"x":1}`), RequestIDHeader, "log-2")

	lines := e.logs.find(t, "http request")
	if len(lines) != 2 {
		t.Fatalf("want 2 access log lines, got:\n%s", e.logs)
	}
	want := []map[string]any{
		{"method": "GET", "route": "/v1/orders/:id", "status": float64(200), "request_id": "log-1"},
		{"method": "POST", "route": "/v1/orders", "status": float64(400), "request_id": "log-2", "code": "invalid_json"},
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
		if b, _ := lines[i]["bytes"].(float64); b <= 0 {
			t.Errorf("line %d: bytes = %v", i, lines[i]["bytes"])
		}
		if _, ok := lines[i]["duration"]; !ok {
			t.Errorf("line %d: no duration", i)
		}
	}
}

func TestNewEngine_SharedRegistryDoesNotPanic(t *testing.T) {
	t.Parallel()
	e1 := newTestEngine(t)
	e2 := NewEngine(Options{Registerer: e1.reg, Logger: slog.New(slog.DiscardHandler)})
	e2.GET("/x", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	do(t, e2, "GET", "/x", nil)
	if got := counterValue(t, e1.reg, "GET", "/x", "204"); got != 1 {
		t.Errorf("second engine's request counted %v times, want 1", got)
	}
}
