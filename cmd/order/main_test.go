package main_test

import (
	"testing"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestOrderBinary(t *testing.T) {
	t.Parallel()
	testkit.CheckServiceBinary(t, "./cmd/order", "ORDER_HTTP_ADDR", "MYSQL_DSN", "ORDER_TOKEN_TTL")
}
