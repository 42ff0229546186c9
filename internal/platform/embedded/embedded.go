package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Redis starts miniredis on a free loopback port. Its TTLs follow the wall
// clock (ClockTTL), so tokens and locks expire as they would on Redis.
func Redis() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded: redis: %w", err)
	}
	return m, nil
}

// KafkaOptions configures Kafka.
type KafkaOptions struct {
	// Brokers is the number of brokers (default 1).
	Brokers int
	// Partitions per seeded topic (default 3).
	Partitions int32
	// Topics are created at start.
	Topics []string
	// Ports pins the listeners (one per broker); empty picks free ports. A
	// restart on the same ports lets clients reconnect.
	Ports []int
	// DataDir keeps the log on disk so a restarted cluster keeps its data;
	// empty keeps it in memory.
	DataDir string
}

// Kafka starts a kfake cluster on loopback. Close it with (*kfake.Cluster).Close.
func Kafka(o KafkaOptions) (*kfake.Cluster, error) {
	if o.Brokers <= 0 {
		o.Brokers = 1
	}
	if o.Partitions <= 0 {
		o.Partitions = 3
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(o.Brokers),
		kfake.DefaultNumPartitions(int(o.Partitions)),
		// kfake's default minimum is 6 s; consumers use exactly that.
		kfake.GroupMinSessionTimeout(6 * time.Second),
	}
	if len(o.Ports) > 0 {
		opts = append(opts, kfake.Ports(o.Ports...))
	}
	if len(o.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(o.Partitions, o.Topics...))
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: kafka: %w", err)
	}
	return c, nil
}

// SQLiteDSN returns the DSN of a SQLite file named name under dir, creating dir.
func SQLiteDSN(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("embedded: sqlite: %w", err)
	}
	abs, err := filepath.Abs(filepath.Join(dir, name+".db"))
	if err != nil {
		return "", err
	}
	return "sqlite:" + abs, nil
}
