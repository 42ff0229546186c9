package order

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// Page limits (DESIGN.md): a user's listing, and the internal listing
// reconciliation pages through.
const (
	DefaultListLimit     = 20
	MaxListLimit         = 100
	DefaultInternalLimit = 100
	MaxInternalLimit     = 500
)

// Page is one page of a keyset listing. NextCursor is "" on the last page.
type Page struct {
	Orders     []Order
	NextCursor string
}

// ListRequest is a user's listing request as the API receives it.
type ListRequest struct {
	UserID, Status, Limit, Cursor string
}

// List returns a page of the user's orders, newest first. The cursor is
// keyset, not an offset: an order created between two pages never makes the
// next page repeat or skip one. Errors: 400 invalid_request for a bad
// status, limit (1–100, default 20) or cursor.
func (s *Service) List(ctx context.Context, r ListRequest) (Page, error) {
	st, err := ParseStatus(r.Status)
	if err != nil {
		return Page{}, err
	}
	limit, err := ParseLimit(r.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return Page{}, err
	}
	q := ListQuery{UserID: r.UserID, Status: st, Limit: limit + 1}
	if r.Cursor != "" {
		if q.BeforeID, err = decodeListCursor(r.Cursor); err != nil {
			return Page{}, err
		}
	}
	found, err := s.store.List(ctx, q)
	if err != nil {
		return Page{}, dbUnavailable(err)
	}
	p := Page{Orders: found}
	if len(found) > limit { // one more row than asked for: there is a next page
		p.Orders = found[:limit]
		p.NextCursor = encodeCursor("o", FormatID(found[limit-1].ID))
	}
	return p, nil
}

// UpdatedRequest is the internal listing request as the API receives it.
type UpdatedRequest struct {
	Status, UpdatedFrom, UpdatedTo, Limit, Cursor string
}

// ListUpdated returns a page of orders with UpdatedFrom ≤ updated_at <
// UpdatedTo (RFC 3339; either may be empty for an open end), oldest update
// first, for reconciliation. Errors: 400 invalid_request for a bad status,
// time, limit (1–500, default 100) or cursor.
func (s *Service) ListUpdated(ctx context.Context, r UpdatedRequest) (Page, error) {
	st, err := ParseStatus(r.Status)
	if err != nil {
		return Page{}, err
	}
	from, err := parseTime("updated_from", r.UpdatedFrom, time.Unix(0, 0))
	if err != nil {
		return Page{}, err
	}
	to, err := parseTime("updated_to", r.UpdatedTo, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return Page{}, err
	}
	if !from.Before(to) {
		return Page{}, invalid("updated_from must be before updated_to.")
	}
	limit, err := ParseLimit(r.Limit, DefaultInternalLimit, MaxInternalLimit)
	if err != nil {
		return Page{}, err
	}
	q := UpdatedQuery{Status: st, From: from, To: to, Limit: limit + 1}
	if r.Cursor != "" {
		k, err := decodeUpdatedCursor(r.Cursor)
		if err != nil {
			return Page{}, err
		}
		q.After = &k
	}
	found, err := s.store.ListUpdated(ctx, q)
	if err != nil {
		return Page{}, dbUnavailable(err)
	}
	p := Page{Orders: found}
	if len(found) > limit {
		p.Orders = found[:limit]
		last := found[limit-1]
		p.NextCursor = encodeCursor("u", strconv.FormatInt(last.UpdatedAt.UnixMicro(), 10), FormatID(last.ID))
	}
	return p, nil
}

// ParseLimit parses a page size: "" is def, else an integer in [1, max].
func ParseLimit(s string, def, max int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, invalid("limit must be an integer from 1 to %d; got %q.", max, clip(s, 32))
	}
	return n, nil
}

func parseTime(name, s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalid("%s must be an RFC 3339 time (e.g. 2026-01-02T15:04:05Z); got %q.", name, clip(s, 64))
	}
	return t.UTC(), nil
}

// Cursors are opaque to clients: base64url of "kind:field:field". The kind
// keeps a cursor of one listing from being read by the other.
func encodeCursor(kind string, fields ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strings.Join(fields, ":")))
}

func decodeCursor(kind, c string, n int) ([]string, error) {
	if len(c) > 128 { // ours are far shorter; do not decode a megabyte
		return nil, badCursor()
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.Split(string(b), ":")
	if err != nil || len(parts) != n+1 || parts[0] != kind {
		return nil, badCursor()
	}
	return parts[1:], nil
}

func decodeListCursor(c string) (int64, error) {
	f, err := decodeCursor("o", c, 1)
	if err != nil {
		return 0, err
	}
	id, ok := ParseID(f[0])
	if !ok {
		return 0, badCursor()
	}
	return id, nil
}

func decodeUpdatedCursor(c string) (UpdatedKey, error) {
	f, err := decodeCursor("u", c, 2)
	if err != nil {
		return UpdatedKey{}, err
	}
	us, uerr := strconv.ParseInt(f[0], 10, 64)
	id, ok := ParseID(f[1])
	if uerr != nil || !ok {
		return UpdatedKey{}, badCursor()
	}
	return UpdatedKey{UpdatedAt: time.UnixMicro(us).UTC(), ID: id}, nil
}

func badCursor() error {
	return apperr.New(apperr.InvalidRequest, "cursor is malformed; pass next_cursor from the previous page unchanged.")
}
