// Package app wires the order service: configuration, infrastructure, HTTP
// routes and background work. cmd/order runs it alone; cmd/demo runs it next
// to the payment service in one process.
package app

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/service"
)

// Deps are what the caller may hand in instead of the defaults.
type Deps struct {
	Log *slog.Logger
	// Listener, if set, is served instead of binding Config.HTTPAddr.
	Listener net.Listener
}

// Run serves the order service until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	log := deps.Log
	if log == nil {
		log = slog.Default()
	}
	// A bad lease, TTL or rate is refused before anything is opened.
	if err := errors.Join(checkConfig(cfg), checkBackgroundConfig(cfg)); err != nil {
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
		Name: "order", DSN: cfg.MySQLDSN, Migrations: Migrations(),
		RedisAddr: cfg.RedisAddr, Brokers: cfg.KafkaBrokers, Topics: events.Topics, Log: log,
	})
	if err != nil {
		return err
	}
	defer inf.Close()

	// The order API: submit tokens and orders on the service's database and
	// Redis, every /v1/ route rate-limited per user.
	closeAPI, err := Mount(Wiring{
		Config: cfg, DB: inf.DB, Redis: inf.Redis, Engine: inf.Engine,
		Registry: inf.Registry, Log: log, KeyPrefix: DefaultKeyPrefix,
	})
	if err != nil {
		return err
	}
	inf.OnClose(closeAPI)

	// Background work: the payment-event consumer and the timeout closer.
	// They stop with ctx, while the HTTP server drains; Close waits for them.
	stopBackground, err := StartBackground(ctx, Background{
		Config: cfg, DB: inf.DB, Registry: inf.Registry, Log: log, KeyPrefix: DefaultKeyPrefix,
	})
	if err != nil {
		return err
	}
	inf.OnClose(stopBackground)

	inf.EnsureTopics(ctx)
	log.Info("order service listening", "addr", ln.Addr().String())
	return inf.Serve(ctx, ln)
}
