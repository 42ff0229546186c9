package main_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestPaymentBinary_MissingEnvironmentExitsNamingTheVariable(t *testing.T) {
	t.Parallel()
	bin := testkit.BuildBinary(t, "./cmd/payment")
	p := testkit.Start(t, bin, nil)
	if code := p.Wait(10 * time.Second); code == 0 || code == -1 {
		t.Fatalf("exit code %d, want a failure", code)
	}
	if out := p.Output(); !strings.Contains(out, "MYSQL_DSN") {
		t.Fatalf("output does not name the first missing variable MYSQL_DSN:\n%s", out)
	}
}

func TestPaymentBinary_MalformedVariableIsNamed(t *testing.T) {
	t.Parallel()
	bin := testkit.BuildBinary(t, "./cmd/payment")
	env, _ := testkit.ServiceEnv(t, "PAYMENT_HTTP_ADDR")
	p := testkit.Start(t, bin, append(env, "RECONCILE_INTERVAL=forever"))
	if code := p.Wait(10 * time.Second); code == 0 || code == -1 {
		t.Fatalf("exit code %d, want a failure", code)
	}
	if out := p.Output(); !strings.Contains(out, "RECONCILE_INTERVAL") {
		t.Fatalf("output does not name RECONCILE_INTERVAL:\n%s", out)
	}
}

func TestPaymentBinary_SIGTERMExitsZeroWithinTenSeconds(t *testing.T) {
	t.Parallel()
	bin := testkit.BuildBinary(t, "./cmd/payment")
	env, url := testkit.ServiceEnv(t, "PAYMENT_HTTP_ADDR")
	p := testkit.Start(t, bin, env)
	testkit.WaitReady(t, url, 30*time.Second)
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(10 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM (-1: still running after 10 s)", code)
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, ok := p.WaitLine(ctx, `"msg":"stopped"`); !ok {
		t.Errorf("no clean-stop log line")
	}
}
