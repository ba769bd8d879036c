package store

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// banReads are the three ways the bans are read: DB.EachActiveBan through
// the driver itself, ActiveBans and a View's EachActiveBan through
// database/sql.
func banReads(db *DB) map[string]func() ([]Ban, error) {
	each := func(each func(func(*Ban) error) error) ([]Ban, error) {
		var bs []Ban
		err := each(func(b *Ban) error { bs = append(bs, *b); return nil })
		return bs, err
	}
	return map[string]func() ([]Ban, error){
		"EachActiveBan": func() ([]Ban, error) { return each(db.EachActiveBan) },
		"ActiveBans":    db.ActiveBans,
		"View": func() ([]Ban, error) {
			var bs []Ban
			err := db.View(func(s Reader) error {
				var err error
				bs, err = each(s.EachActiveBan)
				return err
			})
			return bs, err
		},
	}
}

// TestBanReads: the three reads of the bans give the bans written, every
// field, and a row that cannot be a ban (a value of the wrong type, an
// address that is none: an operator's sqlite3, a damaged file) is an
// error of each naming the database, the ban and the column.
func TestBanReads(t *testing.T) {
	t0 := at("2026-11-25T12:00:00.123Z")
	bans := []Ban{
		{Rule: "deny", Key: "198.51.100.0/24", Kind: PhaseBan, Since: t0, Reason: "deny list", Origin: OriginDeny},
		{Rule: "flood", Key: "203.0.113.7", Kind: PhaseBan, Since: t0, Until: t0.Add(3600_500 * time.Millisecond), Reason: "rate 31 per 10s > 30",
			Violations: 3, Origin: OriginDetector, Node: "web1"},
		{Rule: "ua", Key: "ua:x\x00\xff\n\"", Kind: PhaseThrottle, Since: t0, Until: t0.Add(time.Millisecond), LogOnly: true, Origin: OriginOperator,
			Who: "uid 0 (root)", Node: "web1", Addresses: []netip.Addr{netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("2001:db8::1")}},
	}
	for _, c := range []struct {
		name, set, want string
	}{
		{"valid", "", ""},
		{"addresses", `addresses = 'not-an-address'`, `ban flood 203.0.113.7: addresses "not-an-address"`},
		{"log_only", `log_only = 2`, "ban flood 203.0.113.7: column log_only: int64 2, want 0 or 1"},
		{"since_ms text", `since_ms = 'soon'`, "ban flood 203.0.113.7: column since_ms: string soon, want INTEGER"},
		{"violations real", `violations = 1.5`, "ban flood 203.0.113.7: column violations: float64 1.5, want INTEGER"},
		{"reason blob", `reason = x'00ff'`, ""}, // a BLOB in a TEXT column reads as its bytes, as Scan into a string does
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "logjail.db")
			db := mustOpen(t, path, Options{})
			if err := db.Checkpoint(&Checkpoint{Time: t0, SetBans: bans}); err != nil {
				t.Fatal(err)
			}
			want := bans
			if c.set != "" {
				if _, err := db.w.Exec(`UPDATE bans SET ` + c.set + ` WHERE rule = 'flood'`); err != nil {
					t.Fatal(err)
				}
				if c.want == "" {
					want = append([]Ban(nil), bans...)
					want[1].Reason = "\x00\xff"
				}
			}
			ro := mustOpen(t, path, Options{ReadOnly: true})
			for name, read := range banReads(ro) {
				got, err := read()
				if c.want != "" {
					if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
						t.Errorf("%s: error %v; want one naming %s and %q", name, err, path, c.want)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
					t.Errorf("%s (-written +read):\n%s", name, diff)
				}
			}
		})
	}
}
