// Command demo runs the whole system in one process on a machine with only
// Go: embedded Redis (miniredis) and Kafka (kfake) on free loopback ports,
// one SQLite file per service under DATA_DIR, and both services talking to
// each other over loopback HTTP and the Kafka protocol, exactly as they would
// in production. The same environment variables as the service binaries
// point it at real MySQL, Redis and Kafka instead (DESIGN.md, "Configuration").
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	orderapp "github.com/onceonly/onceonly/internal/order/app"
	paymentapp "github.com/onceonly/onceonly/internal/payment/app"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/config"
	"github.com/onceonly/onceonly/internal/platform/embedded"
	"github.com/onceonly/onceonly/internal/platform/service"
)

// Demo defaults, printed at start so the walkthrough can use them.
const (
	demoGatewaySecret = "demo-secret"
	demoInternalToken = "demo-internal-token"
)

func main() { service.Main("demo", run) }

func run(ctx context.Context, log *slog.Logger) error {
	start := time.Now()
	env := config.FromOS()
	dataDir := env.String("DATA_DIR", "./data")
	orderAddr := env.String("ORDER_HTTP_ADDR", ":8080")
	paymentAddr := env.String("PAYMENT_HTTP_ADDR", ":8081")
	if err := env.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("DATA_DIR: %w", err)
	}

	// Infrastructure: real servers where the environment names them,
	// embedded stand-ins otherwise.
	redisAddr := env.String("REDIS_ADDR", "")
	if redisAddr == "" {
		m, err := embedded.Redis()
		if err != nil {
			return err
		}
		defer m.Close()
		redisAddr = m.Addr()
	}
	brokers := env.String("KAFKA_BROKERS", "")
	if brokers == "" {
		k, err := embedded.Kafka(embedded.KafkaOptions{
			Topics: []string{events.Topic, events.DLQTopic}, Partitions: 6,
			DataDir: dataDir + "/kafka",
		})
		if err != nil {
			return err
		}
		defer k.Close()
		brokers = strings.Join(k.ListenAddrs(), ",")
	}
	orderDSN, err := dsnOr(env.String("ORDER_MYSQL_DSN", ""), dataDir, "order")
	if err != nil {
		return err
	}
	paymentDSN, err := dsnOr(env.String("PAYMENT_MYSQL_DSN", ""), dataDir, "payment")
	if err != nil {
		return err
	}

	// Bind both listeners first: each service's URL is the other's config.
	orderLn, err := service.Listen(orderAddr)
	if err != nil {
		return err
	}
	paymentLn, err := service.Listen(paymentAddr)
	if err != nil {
		orderLn.Close()
		return err
	}
	orderURL, paymentURL := baseURL(orderLn), baseURL(paymentLn)

	shared := map[string]string{
		"REDIS_ADDR":             redisAddr,
		"KAFKA_BROKERS":          brokers,
		"PAYMENT_SERVICE_URL":    env.String("PAYMENT_SERVICE_URL", paymentURL),
		"ORDER_SERVICE_URL":      env.String("ORDER_SERVICE_URL", orderURL),
		"PAYMENT_GATEWAY_SECRET": env.String("PAYMENT_GATEWAY_SECRET", demoGatewaySecret),
		"INTERNAL_API_TOKEN":     env.String("INTERNAL_API_TOKEN", demoInternalToken),
	}
	orderCfg, err := orderapp.LoadConfig(overlay(shared, map[string]string{"MYSQL_DSN": orderDSN}))
	if err != nil {
		return err
	}
	paymentCfg, err := paymentapp.LoadConfig(overlay(shared, map[string]string{"MYSQL_DSN": paymentDSN}))
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- wrap("order", orderapp.Run(ctx, orderCfg, orderapp.Deps{Log: log.With("service", "order"), Listener: orderLn}))
	}()
	go func() {
		defer wg.Done()
		errs <- wrap("payment", paymentapp.Run(ctx, paymentCfg, paymentapp.Deps{Log: log.With("service", "payment"), Listener: paymentLn}))
	}()

	readyErr := make(chan error, 1)
	go func() { readyErr <- waitReady(ctx, orderURL, paymentURL) }()
	select {
	case err := <-readyErr:
		if err == nil {
			printBanner(os.Stdout, time.Since(start), orderURL, paymentURL, redisAddr, brokers, shared)
		}
	case err := <-errs:
		cancel()
		wg.Wait()
		return err
	}

	err = <-errs
	cancel()
	wg.Wait()
	if second := <-errs; err == nil {
		err = second
	}
	return err
}

func wrap(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// overlay reads variables from the process environment first, then from the
// demo's wiring, so a user can override any of them.
func overlay(layers ...map[string]string) *config.Env {
	return config.New(func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok && k != "MYSQL_DSN" {
			return v, true
		}
		for _, l := range layers {
			if v, ok := l[k]; ok {
				return v, true
			}
		}
		return "", false
	})
}

func dsnOr(dsn, dataDir, name string) (string, error) {
	if dsn != "" {
		return dsn, nil
	}
	return embedded.SQLiteDSN(dataDir, name)
}

func baseURL(ln net.Listener) string {
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return fmt.Sprintf("http://%s", net.JoinHostPort(host, fmt.Sprint(addr.Port)))
}

// waitReady polls both /readyz until they answer 200.
func waitReady(ctx context.Context, urls ...string) error {
	client := &http.Client{Timeout: 3 * time.Second}
	for _, u := range urls {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"/readyz", nil)
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				return errors.New("stopped before ready")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func printBanner(w io.Writer, took time.Duration, orderURL, paymentURL, redisAddr, brokers string, shared map[string]string) {
	fmt.Fprintf(w, `
onceonly demo is ready (%.1fs)
order:   %s
payment: %s
redis: %s
kafka: %s
gateway secret: %s
internal token: %s

Start the walkthrough (docs/walkthrough.md) with a submit token:
  curl -s -X POST %s/v1/orders/tokens -H 'X-User-ID: alice'

Ctrl-C stops it; data stays in DATA_DIR.
`, took.Seconds(), orderURL, paymentURL, redisAddr, brokers,
		shared["PAYMENT_GATEWAY_SECRET"], shared["INTERNAL_API_TOKEN"], orderURL)
}
