// Package app wires the payment service: configuration, infrastructure, HTTP
// routes and background work. cmd/payment runs it alone; cmd/demo runs it next
// to the order service in one process.
package app

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/service"
)

// Deps are what the caller may hand in instead of the defaults.
type Deps struct {
	Log *slog.Logger
	// Listener, if set, is served instead of binding Config.HTTPAddr.
	Listener net.Listener
}

// Run serves the payment service until ctx ends, then shuts down gracefully:
// the HTTP drain first, then the outbox relay (bounded), then the clients.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	log := deps.Log
	if log == nil {
		log = slog.Default()
	}
	// A missing secret or token is refused before anything is opened.
	if err := checkConfig(cfg); err != nil {
		return err
	}
	ln := deps.Listener
	if ln == nil {
		var err error
		if ln, err = service.Listen(cfg.HTTPAddr); err != nil {
			return err
		}
	}
	defer ln.Close()
	inf, err := service.Open(ctx, service.Options{
		Name: "payment", DSN: cfg.MySQLDSN, Migrations: Migrations(),
		RedisAddr: cfg.RedisAddr, Brokers: cfg.KafkaBrokers, Topics: events.Topics, Log: log,
		// POST /v1/reconciliations answers synchronously within RECONCILE_TIMEOUT.
		WriteTimeout: cfg.ReconcileTimeout + 10*time.Second,
	})
	if err != nil {
		return err
	}
	defer inf.Close()
	inf.EnsureTopics(ctx)

	// The payment API, the gateway simulator and the outbox relay. Close
	// runs after Serve has drained (Infra.Close runs its closers first).
	m, err := Mount(Wiring{
		Config: cfg, DB: inf.DB, Engine: inf.Engine, Registry: inf.Registry, Log: log,
		BaseURL: BaseURL(ln),
	})
	if err != nil {
		return err
	}
	inf.OnClose(m.Close)

	log.Info("payment service listening", "addr", ln.Addr().String(), "gateway", cfg.Gateway)
	return inf.Serve(ctx, ln)
}
