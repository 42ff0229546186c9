// Package ids holds the one definition of each identifier and code shape
// the services exchange: row ids (int64 shown as JSON strings), references
// (user, order, payment and event ids), ISO 4217 currency codes. It renders
// and parses the row ids: only the canonical form of a positive id parses
// ("7", not "07", "+7" or " 7"), so one resource has exactly one URL, and a
// caller answers anything else as not found (DESIGN.md: an id that does not
// parse is simply not found).
package ids

import "strconv"

// Format renders id as the API shows it.
func Format(id int64) string { return strconv.FormatInt(id, 10) }

// Parse parses an id from a URL or a message; ok is false for anything but
// the canonical form of a positive int64.
func Parse(s string) (id int64, ok bool) {
	if len(s) == 0 || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || Format(id) != s {
		return 0, false
	}
	return id, true
}

// Clip bounds client-supplied text echoed back in an error detail or a log
// line to n bytes, never cutting a UTF-8 sequence.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// IsRef reports whether s is 1–max bytes of [A-Za-z0-9_.:-]: the shape of
// every reference the services exchange (user ids, order and payment ids,
// event ids). Such a string is safe as it is in ASCII columns, Redis keys,
// Kafka keys and log lines, so a value that passes can never fail later on
// its bytes (an INSERT that fails for ever, a poisoned key).
func IsRef(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9',
			b == '_', b == '.', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}

// IsCurrency reports whether s has the shape of an ISO 4217 alphabetic code
// (three upper-case letters). Whether the code is assigned is not checked:
// the list changes, and an unassigned code harms only the client who sent it.
func IsCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}
