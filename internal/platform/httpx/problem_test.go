package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// apperrCodes parses package apperr's source and returns the value of every
// constant declared with type Code, so a code added there without a status
// here fails this test instead of becoming a 500 in production.
func apperrCodes(t *testing.T) map[apperr.Code]string {
	t.Helper()
	dir := filepath.Join("..", "apperr")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read apperr source: %v", err)
	}
	codes := map[apperr.Code]string{}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", e.Name(), err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					t.Fatalf("%s: const %s is not declared with type Code; keep every const typed so this test sees it",
						fset.Position(vs.Pos()), vs.Names[0])
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: const %s is not a string literal", fset.Position(vs.Pos()), name)
					}
					v, _ := strconv.Unquote(lit.Value)
					codes[apperr.Code(v)] = name.Name
				}
			}
		}
	}
	if len(codes) == 0 {
		t.Fatal("found no Code constants in apperr: the parser is looking in the wrong place")
	}
	return codes
}

func TestProblemTable_CoversEveryApperrCode(t *testing.T) {
	t.Parallel()
	codes := apperrCodes(t)
	for code, name := range codes {
		if _, ok := problemKinds[code]; !ok {
			t.Errorf("apperr.%s (%q) has no entry in problemKinds", name, code)
		}
	}
	for code := range problemKinds {
		if _, ok := codes[code]; !ok {
			t.Errorf("problemKinds has %q, which apperr does not declare", code)
		}
	}
}

func TestStatusOf_MatchesHTTPContract(t *testing.T) {
	t.Parallel()
	want := map[apperr.Code]int{
		apperr.Unauthenticated:          401,
		apperr.NotFound:                 404,
		apperr.MethodNotAllowed:         405,
		apperr.BodyTooLarge:             413,
		apperr.InvalidJSON:              400,
		apperr.InvalidRequest:           400,
		apperr.IdempotencyKeyMissing:    400,
		apperr.IdempotencyKeyInvalid:    400,
		apperr.RateLimited:              429,
		apperr.TooManyTokens:            429,
		apperr.DependencyUnavailable:    503,
		apperr.Internal:                 500,
		apperr.IdempotencyKeyInUse:      409,
		apperr.InvalidTransition:        409,
		apperr.PaymentMismatch:          409,
		apperr.ReconciliationInProgress: 409,
		apperr.IdempotencyKeyReused:     422,
		apperr.AmountMismatch:           422,
		apperr.Code("no_such_code"):     500,
	}
	for code, status := range want {
		if got := StatusOf(code); got != status {
			t.Errorf("StatusOf(%q) = %d, want %d", code, got, status)
		}
	}
}

func TestError_WrappedDomainErrorKeepsItsStatusAndCode(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	e.POST("/v1/orders/:id/cancel", func(c *gin.Context) {
		Error(c, fmt.Errorf("place order: %w", apperr.New(apperr.InvalidTransition, "Order is PAID; it cannot be cancelled.")))
	})
	rec := do(t, e, "POST", "/v1/orders/42/cancel", nil)
	p := mustProblemBody(t, rec, http.StatusConflict, "invalid_transition")
	if p.Detail != "Order is PAID; it cannot be cancelled." {
		t.Errorf("detail = %q", p.Detail)
	}
	if len(e.logs.find(t, "request failed"))+len(e.logs.find(t, "unexpected error")) != 0 {
		t.Errorf("a 4xx was logged as an error: %s", e.logs)
	}
}

func TestError_UnknownErrorIs500WithCauseOnlyInLog(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	const secret = "dial tcp 10.0.0.7:3306: password for user root rejected"
	e.GET("/boom", func(c *gin.Context) { Error(c, fmt.Errorf("load order: %w", errors.New(secret))) })

	rec := do(t, e, "GET", "/boom", nil, RequestIDHeader, "trace-500")
	p := mustProblemBody(t, rec, http.StatusInternalServerError, "internal")
	if p.Detail != InternalDetail {
		t.Errorf("detail = %q, want the generic %q", p.Detail, InternalDetail)
	}
	if strings.Contains(rec.Body.String(), "10.0.0.7") {
		t.Errorf("cause leaked into the body: %s", rec.Body)
	}
	logged := e.logs.find(t, "unexpected error")
	if len(logged) != 1 {
		t.Fatalf("want one ERROR record of the cause, got logs:\n%s", e.logs)
	}
	if r := logged[0]; r["level"] != "ERROR" || r["request_id"] != "trace-500" || !strings.Contains(fmt.Sprint(r["error"]), secret) {
		t.Errorf("log record = %v, want level ERROR, request_id trace-500 and the cause", r)
	}
}

func TestError_5xxAppErrorsHideInternalDetailAndLogCause(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		err        error
		status     int
		code       string
		wantDetail string
	}{
		{"internal code never shows its detail", apperr.Wrap(errors.New("disk full"), apperr.Internal, "write to /var/lib/mysql failed"),
			500, "internal", InternalDetail},
		{"code missing from the table is internal", apperr.New(apperr.Code("brand_new"), "something specific"),
			500, "internal", InternalDetail},
		{"dependency unavailable keeps its client detail", apperr.Wrap(errors.New("redis: i/o timeout"), apperr.DependencyUnavailable, "Try again later."),
			503, "dependency_unavailable", "Try again later."},
		{"handler's own MaxBytesError is 413", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}),
			413, "body_too_large", "Request body exceeds 10 bytes."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEngine(t)
			e.GET("/x", func(c *gin.Context) { Error(c, tc.err) })
			p := mustProblemBody(t, do(t, e, "GET", "/x", nil), tc.status, tc.code)
			if p.Detail != tc.wantDetail {
				t.Errorf("detail = %q, want %q", p.Detail, tc.wantDetail)
			}
			errorLogs := 0
			for _, r := range e.logs.records(t) {
				if r["level"] == "ERROR" {
					errorLogs++
				}
			}
			if tc.status >= 500 && errorLogs != 1 {
				t.Errorf("want the 5xx cause logged once at ERROR, logs:\n%s", e.logs)
			}
		})
	}
}

func TestProblem_ExtensionsCannotOverrideStandardMembers(t *testing.T) {
	t.Parallel()
	p := Problem{Type: "t", Title: "T", Status: 503, Detail: "d", Code: apperr.DependencyUnavailable,
		Extensions: map[string]any{"status": 200, "code": "ok", "checks": map[string]string{"db": "ok"}}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"t","title":"T","status":503,"detail":"d","code":"dependency_unavailable","checks":{"db":"ok"}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestJSON_UnencodableValueIs500NotHalfA200(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	e.GET("/x", func(c *gin.Context) { JSON(c, http.StatusOK, map[string]any{"f": func() {}}) })
	mustProblemBody(t, do(t, e, "GET", "/x", nil), http.StatusInternalServerError, "internal")
}
