package store

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQueryPlans shows, with EXPLAIN QUERY PLAN, that the queries the CLI
// and the cleaner run are answered from an index, with no full scan of a
// table and no sort: active bans by end, history by key and by time, top
// keys by requests, CPU and last-seen time, and the prune by last-seen
// time. Listing all active bans or all keys walks the table in the order
// of its primary key (a SCAN without a sort).
func TestQueryPlans(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	rows := benchKeys(2000, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	if err := db.Checkpoint(benchCheckpoint(time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC), rows)); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixMilli()
	byKey, byKeyArgs := historyQuery(HistoryQuery{Key: "203.0.113.7", Limit: 50})
	byTime, byTimeArgs := historyQuery(HistoryQuery{Since: time.UnixMilli(now), Limit: 50})
	byKeyRule, byKeyRuleArgs := historyQuery(HistoryQuery{Key: "203.0.113.7", Rule: "flood", Since: time.UnixMilli(now)})
	for _, tc := range []struct {
		name  string
		query string
		args  []any
		index string // the plan must name it
	}{
		{"active bans by until", endedBansQuery, []any{now}, "bans_until"},
		{"active bans by rule and key", activeBansQuery, nil, "SCAN bans"}, // the primary key's order
		{"history by key", byKey, byKeyArgs, "history_key"},
		{"history by key, rule and time", byKeyRule, byKeyRuleArgs, "history_key"},
		{"history by time", byTime, byTimeArgs, "history_time"},
		{"prune history by time", pruneHistoryQuery, []any{now}, "history_time"},
		{"a key held by the history", heldQuery, []any{"flood", "203.0.113.7", now, now}, "history_key"},
		{"a part of a key run", partQuery, []any{int64(1) << runShift}, "USING INTEGER PRIMARY KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := db.r.Query("EXPLAIN QUERY PLAN "+tc.query, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			text := strings.Join(plan, "; ")
			t.Logf("%s", text)
			if !strings.Contains(text, tc.index) {
				t.Errorf("the plan does not use %s: %s", tc.index, text)
			}
			if strings.Contains(text, "TEMP B-TREE") {
				t.Errorf("the plan sorts: %s", text)
			}
			for _, p := range plan {
				if strings.HasPrefix(p, "SCAN ") && p != "SCAN CONSTANT ROW" && !strings.Contains(p, "INDEX") && !strings.HasPrefix(tc.index, "SCAN") {
					t.Errorf("the plan scans a table: %s", text)
				}
			}
		})
	}
}
