package testkit

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CheckServiceBinary builds the service binary pkg ("./cmd/order") and checks
// what every service binary promises an operator: with no environment it
// exits non-zero naming the first required variable (firstRequired); a
// malformed malformedVar is named; started against this test's
// infrastructure (HTTP address in addrVar) it becomes ready and exits 0
// within 10 s of SIGTERM.
func CheckServiceBinary(t *testing.T, pkg, addrVar, firstRequired, malformedVar string) {
	bin := BuildBinary(t, pkg)
	t.Run("MissingEnvironmentExitsNamingTheVariable", func(t *testing.T) {
		t.Parallel()
		p := Start(t, bin, nil)
		if code := p.Wait(10 * time.Second); code == 0 || code == -1 {
			t.Fatalf("exit code %d, want a failure", code)
		}
		if out := p.Output(); !strings.Contains(out, firstRequired) {
			t.Fatalf("output does not name the first missing variable %s:\n%s", firstRequired, out)
		}
	})
	t.Run("MalformedVariableIsNamed", func(t *testing.T) {
		t.Parallel()
		env, _ := ServiceEnv(t, addrVar)
		p := Start(t, bin, append(env, malformedVar+"=forever"))
		if code := p.Wait(10 * time.Second); code == 0 || code == -1 {
			t.Fatalf("exit code %d, want a failure", code)
		}
		if out := p.Output(); !strings.Contains(out, malformedVar) {
			t.Fatalf("output does not name %s:\n%s", malformedVar, out)
		}
	})
	t.Run("SIGTERMExitsZeroWithinTenSeconds", func(t *testing.T) {
		t.Parallel()
		env, url := ServiceEnv(t, addrVar)
		p := Start(t, bin, env)
		WaitReady(t, url, 30*time.Second)
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
	})
}
