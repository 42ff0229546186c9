package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Main runs a service binary: JSON logs on stdout (run gets the bare logger
// and adds its own attributes), SIGINT/SIGTERM cancel the context given to run, and the process exits 0 after a clean shutdown or 1
// (with the error on stderr) otherwise. A second signal, or a shutdown that
// takes longer than hardStop, exits at once.
func Main(name string, run func(ctx context.Context, log *slog.Logger) error) {
	base := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	log := base.With("service", name)
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		log.Info("shutting down", "signal", sig.String())
		cancel()
		select {
		case <-sigs:
		case <-time.After(hardStop):
		}
		fmt.Fprintf(os.Stderr, "%s: shutdown did not finish in time, exiting\n", name)
		os.Exit(2)
	}()
	if err := run(ctx, base); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	log.Info("stopped")
}

// hardStop is the most a shutdown may take before the process gives up on
// it; orchestrators usually SIGKILL at 10 s.
const hardStop = 9500 * time.Millisecond
