package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServerOptions configures NewServer. Zero fields take the defaults below.
type ServerOptions struct {
	// ReadHeaderTimeout bounds a client's headers (slowloris). Default 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the whole request, body included. Default 15s.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to the
	// end of the response, so it must exceed the slowest handler (the payment
	// service's synchronous reconciliation runs up to RECONCILE_TIMEOUT).
	// Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection between requests. Default 60s.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps request headers. Default 64 KiB.
	MaxHeaderBytes int
	// Logger receives net/http's own errors (TLS handshakes, accept failures).
	// Nil means slog.Default().
	Logger *slog.Logger
}

// Server defaults.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// NewServer returns an *http.Server for h with every timeout set: a server
// without them can be held open by slow clients until it runs out of
// connections.
func NewServer(addr string, h http.Handler, o ServerOptions) *http.Server {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: orDefault(o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(o.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      orDefault(o.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       orDefault(o.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    orDefault(o.MaxHeaderBytes, DefaultMaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(log.With(slog.String("component", "http.Server")).Handler(), slog.LevelWarn),
	}
}

func orDefault[T time.Duration | int](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Serve serves srv on ln until ctx is done, then stops accepting and waits up
// to drain for in-flight requests before closing what is left. It returns nil
// after a clean shutdown, the serve error if serving failed first, or an error
// saying the drain bound was hit (those requests were cut off). Passing the
// listener lets a caller bind ":0" and learn the port before serving.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, drain time.Duration, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	addr := ln.Addr().String()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("http server listening", slog.String("addr", addr))

	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil // someone else shut it down
		}
		return fmt.Errorf("httpx: serve %s: %w", addr, err)
	case <-ctx.Done():
	}

	log.Info("http server draining", slog.String("addr", addr), slog.Duration("drain", drain))
	// ctx is already done: the drain needs a deadline of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	serveErr := <-errc // Serve returns as soon as Shutdown closes the listener
	if shutdownErr != nil {
		_ = srv.Close()
		return fmt.Errorf("httpx: drain %s within %s: %w", addr, drain, shutdownErr)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("httpx: serve %s: %w", addr, serveErr)
	}
	log.Info("http server stopped", slog.String("addr", addr))
	return nil
}
