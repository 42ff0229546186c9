package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/config"
)

func TestEnv_NamesTheFirstMissingOrMalformedVariable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want string // substring of Err(); "" = no error
	}{
		{"all set", map[string]string{"A": "x", "D": "5s", "N": "3", "L": "a, b"}, ""},
		{"missing required", map[string]string{"D": "5s"}, "A: required"},
		{"blank counts as missing", map[string]string{"A": "  "}, "A: required"},
		{"malformed duration", map[string]string{"A": "x", "D": "5 minutes"}, "D: want a positive duration"},
		{"negative duration", map[string]string{"A": "x", "D": "-1s"}, "D: want a positive duration"},
		{"int out of range", map[string]string{"A": "x", "N": "0"}, "N: want an integer in [1, 10]"},
		{"int not a number", map[string]string{"A": "x", "N": "three"}, "N: want an integer"},
		{"empty list", map[string]string{"A": "x", "L": " , "}, "L: empty list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := config.FromMap(tc.env)
			e.Required("A")
			e.Duration("D", time.Second)
			e.Int("N", 1, 1, 10)
			e.List("L", nil)
			err := e.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestEnv_DefaultsAndParsedValues(t *testing.T) {
	t.Parallel()
	e := config.FromMap(map[string]string{"D": "2m", "F": "2.5", "L": "a,,b ", "B": "true"})
	if got := e.Duration("D", time.Second); got != 2*time.Minute {
		t.Errorf("D = %v", got)
	}
	if got := e.Duration("UNSET", time.Second); got != time.Second {
		t.Errorf("default duration = %v", got)
	}
	if got := e.Float("F", 1); got != 2.5 {
		t.Errorf("F = %v", got)
	}
	if got := e.List("L", nil); strings.Join(got, "|") != "a|b" {
		t.Errorf("L = %q", got)
	}
	if !e.Bool("B", false) || e.String("S", "def") != "def" {
		t.Error("bool or string default wrong")
	}
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
}
