// Command order is the order service (DESIGN.md, "order service"). All
// configuration comes from the environment; see internal/order/app.Config.
package main

import (
	"context"
	"log/slog"

	"github.com/onceonly/onceonly/internal/order/app"
	"github.com/onceonly/onceonly/internal/platform/config"
	"github.com/onceonly/onceonly/internal/platform/service"
)

func main() { service.Main("order", run) }

func run(ctx context.Context, log *slog.Logger) error {
	cfg, err := app.LoadConfig(config.FromOS())
	if err != nil {
		return err
	}
	return app.Run(ctx, cfg, app.Deps{Log: log.With("service", "order")})
}
