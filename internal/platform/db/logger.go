package db

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// gormLogger sends gorm's slow queries and unexpected errors to slog. Record
// not found and duplicate keys are outcomes the callers handle, not errors.
type gormLogger struct {
	log  *slog.Logger
	slow time.Duration
}

func newGormLogger(l *slog.Logger, slow time.Duration) logger.Interface {
	if l == nil {
		return logger.Discard
	}
	return &gormLogger{log: l, slow: slow}
}

func (g *gormLogger) LogMode(logger.LogLevel) logger.Interface { return g }
func (g *gormLogger) Info(ctx context.Context, msg string, args ...any) {
	g.log.InfoContext(ctx, msg, "args", args)
}
func (g *gormLogger) Warn(ctx context.Context, msg string, args ...any) {
	g.log.WarnContext(ctx, msg, "args", args)
}
func (g *gormLogger) Error(ctx context.Context, msg string, args ...any) {
	g.log.ErrorContext(ctx, msg, "args", args)
}

func (g *gormLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	elapsed := time.Since(begin)
	switch {
	case err != nil && !errors.Is(err, gorm.ErrRecordNotFound) && !errors.Is(err, gorm.ErrDuplicatedKey) &&
		!errors.Is(err, context.Canceled):
		sql, rows := fc()
		g.log.WarnContext(ctx, "db: query failed", "err", err, "sql", sql, "rows", rows, "elapsed", elapsed)
	case elapsed > g.slow:
		sql, rows := fc()
		g.log.WarnContext(ctx, "db: slow query", "sql", sql, "rows", rows, "elapsed", elapsed)
	}
}
