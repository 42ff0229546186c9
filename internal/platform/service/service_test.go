package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/onceonly/onceonly/internal/platform/service"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// /readyz must answer 503 naming the dependency that is down, and 200 again
// once it is back: an orchestrator routes traffic by it.
func TestReadyz_NamesTheUnreachableDependency(t *testing.T) {
	t.Parallel()
	rdb, _ := testkit.Redis(t)
	redisProxy := testkit.NewProxy(t, rdb.Options().Addr)
	kafkaCluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kafkaCluster.Close()
	inf, err := service.Open(context.Background(), service.Options{
		Name: "test", DSN: testkit.DSN(t), RedisAddr: redisProxy.Addr, Brokers: kafkaCluster.ListenAddrs(),
		Log: testkit.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Close()
	srv := httptest.NewServer(inf.Engine)
	defer srv.Close()

	ready := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Detail string `json:"detail"`
			Code   string `json:"code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Code + " " + body.Detail
	}

	if code, detail := ready(); code != http.StatusOK {
		t.Fatalf("all up: %d %s", code, detail)
	}
	redisProxy.Cut()
	code, detail := ready()
	if code != http.StatusServiceUnavailable || !strings.Contains(detail, "dependency_unavailable") || !strings.Contains(detail, "redis") {
		t.Fatalf("redis down: %d %q, want 503 naming redis", code, detail)
	}
	if strings.Contains(detail, "kafka") || strings.Contains(detail, "db:") {
		t.Fatalf("redis down but detail blames others: %q", detail)
	}
	redisProxy.Restore()
	kafkaCluster.Close()
	code, detail = ready()
	if code != http.StatusServiceUnavailable || !strings.Contains(detail, "kafka") || strings.Contains(detail, "redis") {
		t.Fatalf("kafka down: %d %q, want 503 naming only kafka", code, detail)
	}
}

func TestHealthz_AnswersWhileDependenciesAreDown(t *testing.T) {
	t.Parallel()
	inf, err := service.Open(context.Background(), service.Options{
		Name: "test", DSN: testkit.DSN(t), RedisAddr: "127.0.0.1:1", Brokers: []string{"127.0.0.1:1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Close()
	rec := httptest.NewRecorder()
	inf.Engine.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/healthz = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	inf.Engine.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "onceonly_http_requests_total") {
		t.Fatalf("/metrics = %d without the HTTP series", rec.Code)
	}
}
