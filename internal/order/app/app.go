// Package app wires the order service: configuration, infrastructure, HTTP
// routes and background work. cmd/order runs it alone; cmd/demo runs it next
// to the payment service in one process.
package app

import (
	"context"
	"log/slog"
	"net"

	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/service"
)

// Deps are what the caller may hand in instead of the defaults.
type Deps struct {
	Log *slog.Logger
	// Listener, if set, is served instead of binding Config.HTTPAddr.
	Listener net.Listener
}

func migrations() []db.Migration { return nil }

// Run serves the order service until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	log := deps.Log
	if log == nil {
		log = slog.Default()
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
		Name: "order", DSN: cfg.MySQLDSN, Migrations: migrations(),
		RedisAddr: cfg.RedisAddr, Brokers: cfg.KafkaBrokers, Topics: events.Topics, Log: log,
	})
	if err != nil {
		return err
	}
	defer inf.Close()
	inf.EnsureTopics(ctx)
	log.Info("order service listening", "addr", ln.Addr().String())
	return inf.Serve(ctx, ln)
}
