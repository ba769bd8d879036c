package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"strings"
	"time"
)

// Snapshot reads the database. One from View sees one checkpoint
// throughout; the DB's own read methods each see the latest one.
type Snapshot struct {
	db *DB
	q  querier
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// View runs fn in one read transaction: every read through s (a
// *Snapshot) sees the same committed checkpoint, whatever the writer
// commits meanwhile, and the writer is never blocked by it. s is valid
// only during fn.
func (db *DB) View(fn func(s Reader) error) error {
	tx, err := db.r.Begin() // BEGIN DEFERRED: the snapshot is taken by the first read
	if err != nil {
		return db.errf("read", "%w", err)
	}
	defer tx.Rollback()
	return fn(&Snapshot{db: db, q: tx})
}

func (db *DB) snap() *Snapshot { return &Snapshot{db: db, q: db.r} }

// Global returns the detector-wide state of the last checkpoint and that
// checkpoint's time; nil and the zero time when no checkpoint was written.
func (db *DB) Global() ([]byte, time.Time, error) { return db.snap().Global() }

// Keys calls fn with every saved key state, in (rule, key) order,
// streaming. The row and its Data are reused: fn must copy what it keeps.
// An error from fn stops the walk and is returned as it is.
func (db *DB) Keys(fn func(*KeyRow) error) error { return db.snap().Keys(fn) }

// Positions returns the saved source positions, by path.
func (db *DB) Positions() ([]Position, error) { return db.snap().Positions() }

// ActiveBans returns the active throttles and bans, sorted by rule, key.
func (db *DB) ActiveBans() ([]Ban, error) { return db.snap().ActiveBans() }

// EndedBans returns the active bans whose until is at or before t, the
// soonest ended first: what the cleaner expires.
func (db *DB) EndedBans(t time.Time) ([]Ban, error) { return db.snap().EndedBans(t) }

// History returns the events q selects, newest first.
func (db *DB) History(q HistoryQuery) ([]Event, error) { return db.snap().History(q) }

// TopKeys returns the n key states of rule with the most requests, the most
// CPU, or the latest last-seen time (by "requests", "cpu", "last_seen"),
// without their Data. By CPU only keys with some CPU are listed.
func (db *DB) TopKeys(rule, by string, n int) ([]KeyRow, error) {
	return db.snap().TopKeys(rule, by, n)
}

// Meta returns a meta value and whether it is set.
func (db *DB) Meta(k string) (string, bool, error) { return db.snap().Meta(k) }

func (s *Snapshot) errf(op, format string, a ...any) error { return s.db.errf(op, format, a...) }

// Global: see DB.Global.
func (s *Snapshot) Global() ([]byte, time.Time, error) {
	var data []byte
	var t sql.NullInt64
	err := s.q.QueryRowContext(context.Background(), `SELECT time_ms, data FROM detector WHERE id = 1`).Scan(&t, &data)
	if err == sql.ErrNoRows {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, s.errf("read detector state", "%w", err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, fromMS(t), nil
}

// Positions: see DB.Positions.
func (s *Snapshot) Positions() ([]Position, error) {
	rows, err := s.q.QueryContext(context.Background(), `SELECT path, dev, inode, offset, line, head_hash, size FROM positions ORDER BY path`)
	if err != nil {
		return nil, s.errf("read positions", "%w", err)
	}
	defer rows.Close()
	var ps []Position
	for rows.Next() {
		var p Position
		var dev, inode int64
		if err := rows.Scan(&p.Path, &dev, &inode, &p.Offset, &p.Line, &p.HeadHash, &p.Size); err != nil {
			return nil, s.errf("read positions", "%w", err)
		}
		p.Dev, p.Inode = uint64(dev), uint64(inode)
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errf("read positions", "%w", err)
	}
	return ps, nil
}

const banColumns = `rule, key, kind, since_ms, until_ms, reason, violations, addresses, origin, who, log_only, node`

const (
	activeBansQuery = `SELECT ` + banColumns + ` FROM bans ORDER BY rule, key`
	endedBansQuery  = `SELECT ` + banColumns + ` FROM bans WHERE until_ms <= ?1 ORDER BY until_ms, rule, key`
)

// ActiveBans: see DB.ActiveBans.
func (s *Snapshot) ActiveBans() ([]Ban, error) { return s.bans("read bans", activeBansQuery) }

// EndedBans: see DB.EndedBans.
func (s *Snapshot) EndedBans(t time.Time) ([]Ban, error) {
	return s.bans("read ended bans", endedBansQuery, t.UnixMilli())
}

// bans returns the bans q selects; nil on error.
func (s *Snapshot) bans(op, q string, args ...any) ([]Ban, error) {
	var bs []Ban
	err := s.eachBan(op, q, args, func(b *Ban) error {
		bs = append(bs, *b) // its Addresses are its own: parseAddrs makes them
		return nil
	})
	if err != nil {
		return nil, err
	}
	return bs, nil
}

// eachBan calls fn with each ban q selects, reusing one Ban. An error
// from fn is returned as it is; the others are s.errf(op, …).
func (s *Snapshot) eachBan(op, q string, args []any, fn func(*Ban) error) error {
	rows, err := s.q.QueryContext(context.Background(), q, args...)
	if err != nil {
		return s.errf(op, "%w", err)
	}
	defer rows.Close()
	var b Ban
	var vals [len(banColumnNames)]any
	var dest [len(banColumnNames)]any
	for i := range dest {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest[:]...); err != nil {
			return s.errf(op, "%w", err)
		}
		if err := decodeBan(&b, &vals); err != nil {
			return s.errf(op, "%w", err)
		}
		if err := fn(&b); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.errf(op, "%w", err)
	}
	return nil
}

// banColumnNames are banColumns, one a value.
var banColumnNames = [...]string{"rule", "key", "kind", "since_ms", "until_ms", "reason", "violations", "addresses", "origin", "who", "log_only", "node"}

// decodeBan fills b from a row of banColumns as the driver gives it, without
// database/sql's conversions (a list reads 100,000 of them). b is the
// previous row's ban: a rule, kind, reason, origin, who or node equal to
// its own keeps b's string, so that bans kept by the caller share one copy of
// the text most of them repeat, not one each (a list of 100,000 bans
// holds 7 MB less).
func decodeBan(b *Ban, v *[len(banColumnNames)]any) error {
	r := row{v: v[:], names: banColumnNames[:]}
	same := func(s *string, i int) {
		if t := r.text(i); t != *s {
			*s = t
		}
	}
	same(&b.Rule, 0)
	b.Key = r.text(1)
	same(&b.Kind, 2)
	b.Since, b.Until = r.ms(3), r.ms(4)
	same(&b.Reason, 5)
	b.Violations = int(r.int(6))
	as := r.text(7)
	same(&b.Origin, 8)
	same(&b.Who, 9)
	b.LogOnly = r.bool(10)
	same(&b.Node, 11)
	if r.err == nil {
		b.Addresses, r.err = parseAddrs(as)
	}
	if r.err != nil {
		return fmt.Errorf("ban %s %s: %w", b.Rule, b.Key, r.err)
	}
	return nil
}

// row reads one row's values as the driver gives them (TEXT a string,
// INTEGER an int64, NULL nil). A value of another type makes err (the
// first such), naming the column, as Scan would fail on it.
type row struct {
	v     []any
	names []string
	err   error
}

func (r *row) fail(i int, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("column %s: %T %v, want %s", r.names[i], r.v[i], r.v[i], want)
	}
}

func (r *row) text(i int) string {
	switch t := r.v[i].(type) {
	case string:
		return t
	case []byte:
		return string(t)
	}
	r.fail(i, "TEXT")
	return ""
}

func (r *row) int(i int) int64 {
	n, ok := r.v[i].(int64)
	if !ok {
		r.fail(i, "INTEGER")
	}
	return n
}

// ms is a time in unix milliseconds; NULL is the zero time (fromMS).
func (r *row) ms(i int) time.Time {
	if r.v[i] == nil {
		return time.Time{}
	}
	return fromMS(sql.NullInt64{Int64: r.int(i), Valid: true})
}

func (r *row) bool(i int) bool {
	n, ok := r.v[i].(int64)
	if !ok || n != 0 && n != 1 {
		r.fail(i, "0 or 1")
	}
	return n == 1
}

// historyQuery builds the SQL for q: the key index serves a query by key,
// the time index the others.
func historyQuery(q HistoryQuery) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.Key != "" {
		add("key = ?%d", q.Key)
	}
	if q.Rule != "" {
		add("rule = ?%d", q.Rule)
	}
	if q.Kind != "" {
		add("kind = ?%d", q.Kind)
	}
	if !q.Since.IsZero() {
		add("time_ms >= ?%d", q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		add("time_ms < ?%d", q.Until.UnixMilli())
	}
	var b strings.Builder
	b.WriteString(`SELECT time_ms, rule, key, kind, until_ms, reason, violations, addresses, origin, who, log_only, node FROM history`)
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY time_ms DESC, id DESC")
	if q.Limit > 0 {
		args = append(args, q.Limit)
		fmt.Fprintf(&b, " LIMIT ?%d", len(args))
	}
	return b.String(), args
}

// History: see DB.History.
func (s *Snapshot) History(q HistoryQuery) ([]Event, error) {
	query, args := historyQuery(q)
	rows, err := s.q.QueryContext(context.Background(), query, args...)
	if err != nil {
		return nil, s.errf("read history", "%w", err)
	}
	defer rows.Close()
	var es []Event
	for rows.Next() {
		var e Event
		var t, until sql.NullInt64
		var as string
		if err := rows.Scan(&t, &e.Rule, &e.Key, &e.Kind, &until, &e.Reason, &e.Violations, &as, &e.Origin, &e.Who, &e.LogOnly, &e.Node); err != nil {
			return nil, s.errf("read history", "%w", err)
		}
		e.Time, e.Until = fromMS(t), fromMS(until)
		if e.Addresses, err = parseAddrs(as); err != nil {
			return nil, s.errf("read history", "event %s %s: %w", e.Rule, e.Key, err)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errf("read history", "%w", err)
	}
	return es, nil
}

// Meta: see DB.Meta.
func (s *Snapshot) Meta(k string) (string, bool, error) {
	var v string
	err := s.q.QueryRowContext(context.Background(), `SELECT value FROM meta WHERE key = ?1`, k).Scan(&v)
	if err == sql.ErrNoRows {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.errf("read meta", "%s: %w", k, err)
	}
	return v, true, nil
}

// BanCounts counts the active throttles and bans by rule and kind, sorted
// by rule then kind, from the table's primary key without reading its rows.
func (db *DB) BanCounts() ([]BanCount, error) { return db.snap().BanCounts() }

// BanCounts: see DB.BanCounts.
func (s *Snapshot) BanCounts() ([]BanCount, error) {
	rows, err := s.q.QueryContext(context.Background(), `SELECT rule, kind, count(*) FROM bans GROUP BY rule, kind ORDER BY rule, kind`)
	if err != nil {
		return nil, s.errf("count bans", "%w", err)
	}
	defer rows.Close()
	var out []BanCount
	for rows.Next() {
		var c BanCount
		if err := rows.Scan(&c.Rule, &c.Kind, &c.N); err != nil {
			return nil, s.errf("count bans", "%w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errf("count bans", "%w", err)
	}
	return out, nil
}

// EachActiveBan calls fn with every active throttle and ban, in (rule,
// key) order, streaming: what ActiveBans returns, without holding them
// all (a list of 100,000 bans). The Ban is reused between calls; fn must
// copy what it keeps. An error from fn stops the walk and is returned as
// it is.
//
// It reads through the driver itself (database/sql's Conn.Raw), not
// Rows.Scan: a list of 100,000 bans spends a fifth less (BenchmarkList100k).
func (db *DB) EachActiveBan(fn func(*Ban) error) error {
	const op = "read bans"
	ctx := context.Background()
	c, err := db.r.Conn(ctx)
	if err != nil {
		return db.errf(op, "%w", err)
	}
	defer c.Close()
	var fnErr error
	err = c.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("driver %T cannot query", dc)
		}
		rows, err := qc.QueryContext(ctx, activeBansQuery, nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		if n := len(rows.Columns()); n != len(banColumnNames) {
			return fmt.Errorf("%d columns, want %d", n, len(banColumnNames))
		}
		var b Ban
		var dv [len(banColumnNames)]driver.Value
		var vals [len(banColumnNames)]any
		for {
			if err := rows.Next(dv[:]); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			for i, v := range dv {
				vals[i] = v
			}
			if err := decodeBan(&b, &vals); err != nil {
				return err
			}
			if fnErr = fn(&b); fnErr != nil {
				return fnErr
			}
		}
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return db.errf(op, "%w", err)
	}
	return nil
}

// EachActiveBan: see DB.EachActiveBan.
func (s *Snapshot) EachActiveBan(fn func(*Ban) error) error {
	return s.eachBan("read bans", activeBansQuery, nil, fn)
}

// CountActiveBansByKind returns how many throttles and bans are active, by
// kind ("throttle", "ban"): the rows `logjail list` shows, those of rules,
// operators, the deny list and banned ranges alike.
func (db *DB) CountActiveBansByKind() (map[string]int, error) {
	return db.snap().CountActiveBansByKind()
}

// CountActiveBansByKind: see DB.CountActiveBansByKind.
func (s *Snapshot) CountActiveBansByKind() (map[string]int, error) {
	rows, err := s.q.QueryContext(context.Background(), `SELECT kind, count(*) FROM bans GROUP BY kind`)
	if err != nil {
		return nil, s.errf("count bans", "%w", err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var kind string
		var c int
		if err := rows.Scan(&kind, &c); err != nil {
			return nil, s.errf("count bans", "%w", err)
		}
		n[kind] = c
	}
	if err := rows.Err(); err != nil {
		return nil, s.errf("count bans", "%w", err)
	}
	return n, nil
}

// CountActiveBans returns how many throttles and bans are active.
func (db *DB) CountActiveBans() (int, error) { return db.snap().CountActiveBans() }

// CountActiveBans: see DB.CountActiveBans.
func (s *Snapshot) CountActiveBans() (int, error) {
	var n int
	if err := s.q.QueryRowContext(context.Background(), `SELECT count(*) FROM bans`).Scan(&n); err != nil {
		return 0, s.errf("count bans", "%w", err)
	}
	return n, nil
}
