// Package config reads configuration from environment variables only.
//
// An Env collects every problem it meets while the caller reads variables, so a
// service can read its whole configuration and then stop with one message that
// names the first missing or malformed variable (Err). Nothing here panics.
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env reads typed values from an environment lookup function and records the
// first error per variable.
type Env struct {
	lookup func(string) (string, bool)
	errs   []error
}

// FromOS reads the process environment.
func FromOS() *Env { return New(os.LookupEnv) }

// FromMap reads a fixed map; handy in tests and in the demo.
func FromMap(m map[string]string) *Env {
	return New(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// New reads through lookup.
func New(lookup func(string) (string, bool)) *Env { return &Env{lookup: lookup} }

// Err returns nil, or an error naming the first variable that was missing or
// malformed, in the order the caller read them.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return e.errs[0]
}

// Errs returns every problem found.
func (e *Env) Errs() []error { return e.errs }

func (e *Env) get(name string) (string, bool) {
	v, ok := e.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (e *Env) fail(name, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("config: %s: %s", name, fmt.Sprintf(format, args...)))
}

// Required returns the value of name; a missing or empty one is an error.
func (e *Env) Required(name string) string {
	v, ok := e.get(name)
	if !ok {
		e.fail(name, "required but not set")
	}
	return v
}

// String returns the value of name, or def when it is unset.
func (e *Env) String(name, def string) string {
	if v, ok := e.get(name); ok {
		return v
	}
	return def
}

// List returns the comma-separated values of name (trimmed, empties dropped),
// or def when unset.
func (e *Env) List(name string, def []string) []string {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		e.fail(name, "empty list")
	}
	return out
}

// RequiredList is List for a variable that must be set.
func (e *Env) RequiredList(name string) []string {
	if _, ok := e.get(name); !ok {
		e.fail(name, "required but not set")
		return nil
	}
	return e.List(name, nil)
}

// Duration returns name parsed by time.ParseDuration (must be > 0), or def.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.fail(name, "want a positive duration such as 30s or 5m, got %q", v)
		return def
	}
	return d
}

// Int returns name as an integer in [min, max], or def.
func (e *Env) Int(name string, def, min, max int) int {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		e.fail(name, "want an integer in [%d, %d], got %q", min, max, v)
		return def
	}
	return n
}

// Float returns name as a number > 0, or def.
func (e *Env) Float(name string, def float64) float64 {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f != f {
		e.fail(name, "want a positive number, got %q", v)
		return def
	}
	return f
}

// Bool returns name as a boolean (strconv.ParseBool), or def.
func (e *Env) Bool(name string, def bool) bool {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, "want true or false, got %q", v)
		return def
	}
	return b
}
