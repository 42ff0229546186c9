package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func ok(context.Context) error { return nil }

func TestHealthz_OKWithoutConsultingDependencies(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	Health(e, time.Second, Check{"db", func(context.Context) error { return errors.New("down") }})
	rec := do(t, e, "GET", "/healthz", nil)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"status":"ok"}` {
		t.Errorf("healthz = %d %s", rec.Code, rec.Body)
	}
}

func TestReadyz_OKWhenEveryProbePasses(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	Health(e, time.Second, Check{"redis", ok}, Check{"db", ok}, Check{"kafka", ok})
	rec := do(t, e, "GET", "/readyz", nil)
	want := `{"checks":{"db":"ok","kafka":"ok","redis":"ok"},"status":"ready"}`
	if rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Errorf("readyz = %d %s, want 200 %s", rec.Code, rec.Body, want)
	}
}

func TestReadyz_503NamesEveryFailingProbe(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t)
	Health(e, time.Second,
		Check{"db", ok},
		Check{"redis", func(context.Context) error { return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused") }},
		Check{"kafka", func(context.Context) error { panic("probe bug") }},
	)
	rec := do(t, e, "GET", "/readyz", nil)
	p := mustProblemBody(t, rec, http.StatusServiceUnavailable, "dependency_unavailable")
	for _, want := range []string{"not ready: ", "redis: dial tcp 127.0.0.1:6379: connect: connection refused", "kafka: probe panicked"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail = %q, want it to contain %q", p.Detail, want)
		}
	}
	if strings.Contains(p.Detail, "db") || p.Checks["db"] != "ok" || !strings.Contains(p.Checks["redis"], "connection refused") {
		t.Errorf("detail %q / checks %v: want only failing probes in the detail and every probe in checks", p.Detail, p.Checks)
	}
}

func TestReadyz_HangingProbeIsBoundedByTheTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	e := newTestEngine(t)
	Health(e, 50*time.Millisecond,
		Check{"db", ok},
		// Ignores its context, the worst case for a probe.
		Check{"kafka", func(context.Context) error { <-release; return nil }},
	)
	start := time.Now()
	rec := do(t, e, "GET", "/readyz", nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("readyz took %s with a 50ms probe timeout", took)
	}
	p := mustProblemBody(t, rec, http.StatusServiceUnavailable, "dependency_unavailable")
	if !strings.Contains(p.Detail, "kafka: no answer within 50ms") {
		t.Errorf("detail = %q, want the hanging probe named", p.Detail)
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(rec.Body.Bytes(), &raw)
	if _, ok := raw["checks"]; !ok {
		t.Errorf("no checks member: %s", rec.Body)
	}
}

func TestHealth_RejectsDuplicateOrUnnamedChecks(t *testing.T) {
	t.Parallel()
	for name, checks := range map[string][]Check{
		"duplicate": {{"db", ok}, {"db", ok}},
		"unnamed":   {{"", ok}},
		"no probe":  {{"db", nil}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Error("Health accepted it")
				}
			}()
			Health(newTestEngine(t), time.Second, checks...)
		})
	}
}
