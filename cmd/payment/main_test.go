package main_test

import (
	"testing"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestPaymentBinary(t *testing.T) {
	t.Parallel()
	testkit.CheckServiceBinary(t, "./cmd/payment", "PAYMENT_HTTP_ADDR", "MYSQL_DSN", "RECONCILE_INTERVAL")
}
