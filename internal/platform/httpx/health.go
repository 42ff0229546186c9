package httpx

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// Check is one readiness dependency. Probe must honour ctx; one that does not
// is still answered for at the timeout, but keeps running in the background.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
}

// DefaultProbeTimeout bounds each probe when Health is given no timeout.
const DefaultProbeTimeout = 2 * time.Second

// maxProbeError bounds how much of a probe's error reaches the response.
const maxProbeError = 200

// Health registers GET /healthz, which answers 200 while the process serves,
// and GET /readyz, which runs every probe concurrently, each bounded by
// timeout, and answers 200 with each check "ok", or 503 dependency_unavailable
// naming every failing dependency. Liveness never depends on a dependency: a
// restart does not bring Redis back. Names must be unique and non-empty.
func Health(r gin.IRouter, timeout time.Duration, checks ...Check) {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	seen := map[string]bool{}
	for _, ch := range checks {
		if ch.Name == "" || ch.Probe == nil || seen[ch.Name] {
			panic(fmt.Sprintf("httpx: readiness check %q is unnamed, duplicated or has no probe", ch.Name))
		}
		seen[ch.Name] = true
	}
	checks = append([]Check(nil), checks...)
	sort.Slice(checks, func(i, j int) bool { return checks[i].Name < checks[j].Name })

	r.GET("/healthz", func(c *gin.Context) {
		JSON(c, http.StatusOK, gin.H{"status": "ok"})
	})
	r.GET("/readyz", func(c *gin.Context) {
		errs := runProbes(c.Request.Context(), timeout, checks)
		results := make(map[string]string, len(checks))
		var failing []string
		for i, ch := range checks {
			if errs[i] == nil {
				results[ch.Name] = "ok"
				continue
			}
			msg := clip(errs[i].Error(), maxProbeError)
			results[ch.Name] = msg
			failing = append(failing, ch.Name+": "+msg)
		}
		if len(failing) > 0 {
			ErrorWith(c, apperr.New(apperr.DependencyUnavailable, "not ready: %s", strings.Join(failing, "; ")),
				map[string]any{"checks": results})
			return
		}
		JSON(c, http.StatusOK, gin.H{"status": "ready", "checks": results})
	})
}

// runProbes returns one error per check, in order. Each probe runs in its own
// goroutine and is abandoned (not waited for) at its deadline, so one hung
// dependency cannot hang the readiness answer.
func runProbes(ctx context.Context, timeout time.Duration, checks []Check) []error {
	errs := make([]error, len(checks))
	done := make(chan struct{}, len(checks))
	for i, ch := range checks {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = probe(ctx, timeout, ch)
		}()
	}
	for range checks {
		<-done
	}
	return errs
}

func probe(ctx context.Context, timeout time.Duration, ch Check) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := make(chan error, 1) // buffered: an abandoned probe must not block for ever
	go func() {
		defer func() {
			if p := recover(); p != nil {
				res <- fmt.Errorf("probe panicked: %v", p)
			}
		}()
		res <- ch.Probe(ctx)
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %s: %w", timeout, ctx.Err())
	}
}
