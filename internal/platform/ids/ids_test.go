package ids_test

import (
	"testing"

	"github.com/onceonly/onceonly/internal/platform/ids"
)

func TestParse_OnlyTheCanonicalPositiveFormParses(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 9223372036854775807} {
		if got, ok := ids.Parse(s); !ok || got != want {
			t.Errorf("Parse(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "0", "07", "+7", " 7", "7 ", "-1", "1e3", "9223372036854775808", "abc", "１"} {
		if got, ok := ids.Parse(s); ok {
			t.Errorf("Parse(%q) = %d, want not found", s, got)
		}
	}
}

func TestClip_NeverCutsAUTF8Sequence(t *testing.T) {
	t.Parallel()
	if got := ids.Clip("ab", 5); got != "ab" {
		t.Errorf("short: %q", got)
	}
	if got := ids.Clip("a订单", 2); got != "a…" {
		t.Errorf("cut inside a rune: %q", got)
	}
}

func TestIsRef_LettersDigitsAndFourMarksWithinTheBound(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"a", "order-1", "user_42.x:y", "ABC"} {
		if !ids.IsRef(s, 16) {
			t.Errorf("IsRef(%q) = false", s)
		}
	}
	for _, s := range []string{"", "a b", "a/b", "ä", "a\n", "0123456789abcdefg"} {
		if ids.IsRef(s, 16) {
			t.Errorf("IsRef(%q) = true", s)
		}
	}
}

func TestIsCurrency_ThreeUpperCaseLetters(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"CNY": true, "USD": true, "cny": false, "CN": false, "CNYY": false, "C1Y": false, "": false} {
		if got := ids.IsCurrency(s); got != want {
			t.Errorf("IsCurrency(%q) = %v, want %v", s, got, want)
		}
	}
}
