// Package service is the part every onceonly service binary shares: it opens
// the infrastructure (database with migrations, Redis, Kafka reachability),
// builds the HTTP engine with /healthz, /readyz and /metrics, and serves it
// until the context ends, then drains and closes everything within a bound.
//
// Start-up fails fast only on what cannot be served without: configuration
// and the database (migrations must run before any request). Redis and Kafka
// may be down at start: the process serves, /readyz names them as failing,
// and the clients reconnect on their own when they return.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/httpx"
	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/metrics"
)

// Options names what a service needs opened for it.
type Options struct {
	Name         string // "order" or "payment": logs and metrics
	DSN          string
	MaxOpenConns int
	Migrations   []db.Migration
	RedisAddr    string
	Brokers      []string
	// Topics are created if missing (explicitly: auto-creation is off in
	// production clusters).
	Topics []kafka.TopicSpec
	// WriteTimeout bounds one response (0 = httpx's default). A service with a
	// long synchronous endpoint passes a larger one.
	WriteTimeout time.Duration
	Log          *slog.Logger
}

// Infra is the opened infrastructure of one service.
type Infra struct {
	Name     string
	DB       *gorm.DB
	Redis    *redis.Client
	Brokers  []string
	Registry *prometheus.Registry
	Engine   *gin.Engine
	Log      *slog.Logger

	opts    Options
	closers []func() error
}

// dbConnectTimeout bounds how long start-up waits for the database.
const dbConnectTimeout = 30 * time.Second

// Open connects to the database (retrying for up to 30 s: in compose the
// database may still be starting), migrates it, and prepares Redis, the
// metrics registry and the HTTP engine with the health routes.
func Open(ctx context.Context, o Options) (*Infra, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := &Infra{Name: o.Name, Brokers: o.Brokers, Log: log, opts: o, Registry: metrics.NewRegistry()}
	gdb, err := openDB(ctx, o, log)
	if err != nil {
		return nil, err
	}
	inf.DB = gdb
	inf.closers = append(inf.closers, func() error { return db.Close(gdb) })
	if err := db.Migrate(ctx, gdb, log, o.Migrations...); err != nil {
		inf.Close()
		return nil, err
	}

	// Short timeouts, one retry and honoured context deadlines: a dead Redis
	// must turn into a fast 503 (submit fails closed) or a fallback decision
	// (rate limiter), not a request stuck in go-redis's default dial retries.
	inf.Redis = redis.NewClient(&redis.Options{
		Addr:                  o.RedisAddr,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		DialerRetries:         1,
		PoolSize:              64,
	})
	inf.closers = append(inf.closers, inf.Redis.Close)

	inf.Engine = httpx.NewEngine(httpx.Options{Logger: log, Registerer: inf.Registry})
	inf.Engine.GET("/metrics", gin.WrapH(metrics.Handler(inf.Registry)))
	httpx.Health(inf.Engine, 2*time.Second,
		httpx.Check{Name: "db", Probe: func(ctx context.Context) error { return db.Ping(ctx, gdb) }},
		httpx.Check{Name: "redis", Probe: func(ctx context.Context) error { return inf.Redis.Ping(ctx).Err() }},
		httpx.Check{Name: "kafka", Probe: func(ctx context.Context) error { return kafka.Ping(ctx, o.Brokers) }},
	)
	return inf, nil
}

func openDB(ctx context.Context, o Options, log *slog.Logger) (*gorm.DB, error) {
	ctx, cancel := context.WithTimeout(ctx, dbConnectTimeout)
	defer cancel()
	for {
		gdb, err := db.Open(ctx, o.DSN, db.Options{MaxOpenConns: o.MaxOpenConns, Logger: log})
		if err == nil {
			return gdb, nil
		}
		log.Warn("database not reachable yet", "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: database: %w", o.Name, err)
		case <-time.After(time.Second):
		}
	}
}

// EnsureTopics creates the service's topics, retrying in the background until
// Kafka answers or ctx ends; it returns at once.
func (inf *Infra) EnsureTopics(ctx context.Context) {
	if len(inf.opts.Topics) == 0 {
		return
	}
	go func() {
		for backoff := 500 * time.Millisecond; ; backoff = min(backoff*2, 10*time.Second) {
			tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err := kafka.EnsureTopics(tctx, inf.Brokers, inf.opts.Topics...)
			cancel()
			if err == nil {
				inf.Log.Info("kafka topics ready")
				return
			}
			inf.Log.Warn("kafka topics not created yet", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}()
}

// OnClose registers fn to run on Close, before the clients opened by Open are
// closed (last registered, first run).
func (inf *Infra) OnClose(fn func() error) { inf.closers = append(inf.closers, fn) }

// Close closes everything in reverse order of opening.
func (inf *Infra) Close() error {
	var errs []error
	for i := len(inf.closers) - 1; i >= 0; i-- {
		if err := inf.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	inf.closers = nil
	return errors.Join(errs...)
}

// ShutdownGrace bounds the HTTP drain on shutdown; the rest of the 10 s a
// SIGTERM allows is left for consumers, jobs and clients to close.
const ShutdownGrace = 6 * time.Second

// Serve serves the engine on ln until ctx ends, then drains it.
func (inf *Infra) Serve(ctx context.Context, ln net.Listener) error {
	srv := httpx.NewServer(ln.Addr().String(), inf.Engine, httpx.ServerOptions{WriteTimeout: inf.opts.WriteTimeout})
	return httpx.Serve(ctx, srv, ln, ShutdownGrace, inf.Log)
}

// Listen binds addr (":8080", "127.0.0.1:0").
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}
