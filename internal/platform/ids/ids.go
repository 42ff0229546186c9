// Package ids renders and parses the int64 row ids the APIs show as JSON
// strings. Only the canonical form of a positive id parses ("7", not "07",
// "+7" or " 7"), so one resource has exactly one URL, and a caller answers
// anything else as not found (DESIGN.md: an id that does not parse is simply
// not found).
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
