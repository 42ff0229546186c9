package testkit

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
)

// BulkInsert inserts n rows into table with multi-row INSERTs, filling each
// row's values (one per column, in order) with fill(i, row) for i in
// [0, n). Rows are generated chunk by chunk, so a million-row fixture costs
// the memory of one chunk, not of the table. For fixtures only: it bypasses
// every rule of the code under test.
func BulkInsert(tb testing.TB, gdb *gorm.DB, table string, columns []string, n int, fill func(i int, row []any)) {
	tb.Helper()
	// SQLite allows 32,766 placeholders per statement, MySQL 65,535.
	chunk := max(1, min(2000, 30000/len(columns)))
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?,", len(columns)), ",") + ")"
	prefix := "INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") VALUES "
	args := make([]any, 0, chunk*len(columns))
	row := make([]any, len(columns))
	sqlDB, err := gdb.DB()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var stmt strings.Builder
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		args = args[:0]
		stmt.Reset()
		stmt.WriteString(prefix)
		for i := start; i < end; i++ {
			fill(i, row)
			args = append(args, row...)
			if i > start {
				stmt.WriteByte(',')
			}
			stmt.WriteString(tuple)
		}
		if _, err := sqlDB.ExecContext(ctx, stmt.String(), args...); err != nil {
			tb.Fatalf("bulk insert into %s (rows %d–%d): %v", table, start, end-1, err)
		}
	}
}
