// Command payment is the payment service (DESIGN.md, "payment service"). All
// configuration comes from the environment; see internal/payment/app.Config.
package main

import (
	"context"
	"log/slog"

	"github.com/onceonly/onceonly/internal/payment/app"
	"github.com/onceonly/onceonly/internal/platform/config"
	"github.com/onceonly/onceonly/internal/platform/service"
)

func main() { service.Main("payment", run) }

func run(ctx context.Context, log *slog.Logger) error {
	cfg, err := app.LoadConfig(config.FromOS())
	if err != nil {
		return err
	}
	return app.Run(ctx, cfg, app.Deps{Log: log.With("service", "payment")})
}
