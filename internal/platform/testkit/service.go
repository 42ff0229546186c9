package testkit

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ServiceEnv returns the environment a service binary needs to start against
// this test's infrastructure: a fresh database, Redis and a kfake cluster, an
// HTTP port of its own (returned as base URL), and the shared secrets.
func ServiceEnv(t testing.TB, httpAddrVar string, topics ...string) (env []string, baseURL string) {
	t.Helper()
	rdb, _ := Redis(t)
	brokers := Kafka(t, topics...)
	port := FreePort(t)
	return []string{
		"MYSQL_DSN=" + DSN(t),
		"REDIS_ADDR=" + rdb.Options().Addr,
		"KAFKA_BROKERS=" + strings.Join(brokers, ","),
		"PAYMENT_SERVICE_URL=http://127.0.0.1:1",
		"ORDER_SERVICE_URL=http://127.0.0.1:1",
		"PAYMENT_GATEWAY_SECRET=test-secret",
		"INTERNAL_API_TOKEN=test-token",
		fmt.Sprintf("%s=127.0.0.1:%d", httpAddrVar, port),
	}, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// WaitReady polls url+"/readyz" until it answers 200 or d passes, and reports
// how long it took.
func WaitReady(t testing.TB, url string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s/readyz not 200 within %s (last: %s)", url, d, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
