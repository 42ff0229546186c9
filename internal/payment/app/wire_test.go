package app_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment/app"
	"github.com/onceonly/onceonly/internal/platform/httpx"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The simulator calls the service back on its own listener; a wildcard bind
// is reached on IPv4 loopback.
func TestBaseURL_WildcardBindIsReachedOnLoopback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ addr, host string }{
		{"127.0.0.1:0", "http://127.0.0.1:"},
		{":0", "http://127.0.0.1:"},
		{"0.0.0.0:0", "http://127.0.0.1:"},
	} {
		ln, err := net.Listen("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if got, want := app.BaseURL(ln), c.host+strconv.Itoa(port); got != want {
			t.Errorf("BaseURL(%s) = %s, want %s", c.addr, got, want)
		}
		ln.Close()
	}
}

// A configuration that would only fail at the first callback is refused at
// start, naming the variable.
func TestMount_RefusesMissingSecretsAndTokenNamingTheVariable(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 2, app.Migrations()...)
	for _, c := range []struct {
		name string
		cfg  app.Config
		want string
	}{
		{"no token", app.Config{GatewaySecrets: []string{"k"}, Gateway: "simulator"}, "INTERNAL_API_TOKEN"},
		{"no secret", app.Config{InternalToken: "t", Gateway: "simulator"}, "PAYMENT_GATEWAY_SECRET"},
		{"empty secret", app.Config{InternalToken: "t", GatewaySecrets: []string{"k", ""}, Gateway: "simulator"}, "PAYMENT_GATEWAY_SECRET"},
		{"unknown gateway", app.Config{InternalToken: "t", GatewaySecrets: []string{"k"}, Gateway: "stripe"}, "PAYMENT_GATEWAY"},
		{"relay without poll interval", app.Config{InternalToken: "t", GatewaySecrets: []string{"k"}, Gateway: "simulator",
			KafkaBrokers: []string{"127.0.0.1:1"}, LockRedisAddrs: []string{"127.0.0.1:1"}, LockExpiry: 10e9}, "OUTBOX_POLL_INTERVAL"},
		{"reconciliation without a lock", app.Config{InternalToken: "t", GatewaySecrets: []string{"k"}, Gateway: "simulator",
			OrderServiceURL: "http://127.0.0.1:1", ReconcileWindow: time.Hour, ReconcileGrace: time.Second, ReconcileTimeout: time.Minute},
			"LOCK_REDIS_ADDRS"},
		{"grace not below the window", app.Config{InternalToken: "t", GatewaySecrets: []string{"k"}, Gateway: "simulator",
			OrderServiceURL: "http://127.0.0.1:1", LockRedisAddrs: []string{"127.0.0.1:1"}, LockExpiry: 10e9,
			ReconcileWindow: time.Minute, ReconcileGrace: time.Minute, ReconcileTimeout: time.Minute}, "RECONCILE_GRACE"},
		{"order service URL not a URL", app.Config{InternalToken: "t", GatewaySecrets: []string{"k"}, Gateway: "simulator",
			OrderServiceURL: "order:8080", LockRedisAddrs: []string{"127.0.0.1:1"}, LockExpiry: 10e9,
			ReconcileWindow: time.Hour, ReconcileGrace: time.Second, ReconcileTimeout: time.Minute}, "ORDER_SERVICE_URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := app.Mount(app.Wiring{Config: c.cfg, DB: gdb, Engine: httpx.NewEngine(httpx.Options{}), BaseURL: "http://127.0.0.1:1"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Mount = %v, want an error naming %s", err, c.want)
			}
		})
	}
}
