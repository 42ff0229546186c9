package main_test

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The demo must come up on a machine with only Go: embedded Redis, Kafka and
// SQLite, no environment beyond a data directory and two free ports.
func TestDemo_BothServicesReadyWithin15Seconds(t *testing.T) {
	t.Parallel()
	bin := testkit.BuildBinary(t, "./cmd/demo")
	start := time.Now()
	p := testkit.Start(t, bin, []string{
		"DATA_DIR=" + t.TempDir(),
		"ORDER_HTTP_ADDR=127.0.0.1:0",
		"PAYMENT_HTTP_ADDR=127.0.0.1:0",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, ok := p.WaitLine(ctx, "Ctrl-C stops it"); !ok {
		t.Fatalf("no ready banner within 15 s")
	}
	banner := p.Output()
	url := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `:\s+(http://127\.0\.0\.1:\d+)$`).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("banner has no %s URL:\n%s", name, banner)
		}
		return m[1]
	}
	orderURL, paymentURL := url("order"), url("payment")
	testkit.WaitReady(t, orderURL, 15*time.Second-time.Since(start))
	testkit.WaitReady(t, paymentURL, 15*time.Second-time.Since(start))
	t.Logf("demo ready %s after start", time.Since(start).Round(time.Millisecond))

	// The operator's lines: each address on a line of its own (DESIGN.md).
	for _, re := range []string{`(?m)^redis: 127\.0\.0\.1:\d+$`, `(?m)^kafka: 127\.0\.0\.1:\d+$`,
		`(?m)^gateway secret: demo-secret$`, `(?m)^internal token: demo-internal-token$`, `curl -s -X POST http://127\.0\.0\.1:\d+/v1/orders/tokens`} {
		if !regexp.MustCompile(re).MatchString(banner) {
			t.Errorf("banner lacks %s", re)
		}
	}
	for _, forbidden := range []string{":6379", ":9092"} {
		if strings.Contains(banner, "127.0.0.1"+forbidden+"\n") {
			t.Errorf("embedded infrastructure on a well-known port %s", forbidden)
		}
	}

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(10 * time.Second); code != 0 {
		t.Fatalf("demo exit code %d after SIGTERM", code)
	}
}
