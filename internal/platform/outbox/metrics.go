package outbox

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	pm "github.com/onceonly/onceonly/internal/platform/metrics"
)

// metrics carry no labels but a small fixed stage, so their cardinality is
// constant.
type metrics struct {
	published     prometheus.Counter
	publishErrors prometheus.Counter
	marked        prometheus.Counter
	fenced        prometheus.Counter
	pruned        prometheus.Counter
	dbErrors      *prometheus.CounterVec // stage: select|mark|prune
	batch         prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, gdb *gorm.DB) *metrics {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: pm.Namespace, Subsystem: "outbox", Name: name, Help: help}
	}
	m := &metrics{
		published: pm.MustRegister(reg, prometheus.NewCounter(opts("published_total",
			"Events the broker acknowledged (a republished event counts again)."))),
		publishErrors: pm.MustRegister(reg, prometheus.NewCounter(opts("publish_errors_total",
			"Events the broker did not acknowledge (or no producer could be built); they are retried."))),
		marked: pm.MustRegister(reg, prometheus.NewCounter(opts("marked_total",
			"Rows marked published. published_total minus this is what was published but not marked (republished later)."))),
		fenced: pm.MustRegister(reg, prometheus.NewCounter(opts("fenced_total",
			"Marks or prunes refused because a newer relay holds the job: this relay stopped."))),
		pruned: pm.MustRegister(reg, prometheus.NewCounter(opts("pruned_total",
			"Published rows deleted after the retention period."))),
		dbErrors: pm.MustRegister(reg, prometheus.NewCounterVec(opts("db_errors_total",
			"Database errors of the relay, by stage (select, mark, prune)."), []string{"stage"})),
		batch: pm.MustRegister(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: pm.Namespace, Subsystem: "outbox", Name: "batch_duration_seconds",
			Help:    "Duration of a round that had rows: publish and mark.",
			Buckets: pm.DurationBuckets,
		})),
	}
	if reg != nil {
		pm.MustRegister(reg, prometheus.Collector(&backlogCollector{db: gdb}))
	}
	return m
}

// backlogCollector reads the backlog from the table at scrape time, so every
// instance reports it, also (especially) while no relay holds the lock. A
// failed query reports nothing rather than failing the whole scrape.
type backlogCollector struct {
	db *gorm.DB
}

var (
	backlogDesc = prometheus.NewDesc(pm.Namespace+"_outbox_backlog",
		"Unpublished outbox rows (committed, not yet marked published).", nil, nil)
	oldestDesc = prometheus.NewDesc(pm.Namespace+"_outbox_oldest_unpublished_age_seconds",
		"Age of the oldest unpublished outbox row (0 when there is none).", nil, nil)
)

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDesc
	ch <- oldestDesc
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	backlog, age, err := Backlog(ctx, c.db)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(backlog))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age.Seconds())
}

// Backlog returns how many rows are unpublished and the age of the oldest
// (by id) of them, 0 when none. Both queries read the (published_at, id) index.
func Backlog(ctx context.Context, gdb *gorm.DB) (int64, time.Duration, error) {
	var n int64
	if err := gdb.WithContext(ctx).Raw("SELECT COUNT(*) FROM outbox_events WHERE published_at IS NULL").Scan(&n).Error; err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, nil
	}
	var created sql.NullTime
	err := gdb.WithContext(ctx).Raw("SELECT created_at FROM outbox_events WHERE published_at IS NULL ORDER BY id LIMIT 1").
		Row().Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		return n, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return n, max(time.Since(created.Time), 0), nil
}
