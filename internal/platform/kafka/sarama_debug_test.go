package kafka_test

import (
	"log"
	"os"

	"github.com/IBM/sarama"
)

// SARAMA_DEBUG=1 go test -v ./internal/platform/kafka/ shows sarama's own
// log (joins, commits, subscriptions), which it discards by default.
func init() {
	if os.Getenv("SARAMA_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
}
