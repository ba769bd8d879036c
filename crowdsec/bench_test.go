package crowdsec_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/crowdsec"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// BenchmarkStream: one bouncer's pull with n active decisions: a delta
// with nothing new (every update_frequency), and a startup.
func BenchmarkStream(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		db, err := store.Open(filepath.Join(b.TempDir(), "logjail.db"), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		key, hash, _ := crowdsec.NewKey()
		if err := db.AddBouncer(state.Bouncer{Name: "fw", KeyHash: hash, Created: time.Now()}); err != nil {
			b.Fatal(err)
		}
		api, err := crowdsec.New(actions.CrowdsecConfig{Name: "crowdsec", ThrottleAs: "throttle"}, crowdsec.Options{DB: db})
		if err != nil {
			b.Fatal(err)
		}
		es := make([]actions.Entry, n)
		base := netip.MustParseAddr("2001:db8::").As16()
		until := time.Now().Add(time.Hour)
		for i := range es {
			a := base
			a[12], a[13], a[14], a[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
			es[i] = actions.Entry{Prefix: netip.PrefixFrom(netip.AddrFrom16(a), 128), Kind: actions.KindBan, Until: until, Rule: "flood"}
		}
		if err := api.Sync(context.Background(), es, nil); err != nil {
			b.Fatal(err)
		}
		h := api.Handler()
		pull := func(b *testing.B, q string) {
			req := httptest.NewRequest("GET", "/v1/decisions/stream"+q, nil)
			req.Header.Set("X-Api-Key", key)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatal(w.Code)
			}
		}
		pull(b, "?startup=true")
		b.Run("delta/"+itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pull(b, "")
			}
		})
		b.Run("startup/"+itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pull(b, "?startup=true")
			}
		})
		db.Close()
	}
}

func itoa(n int) string {
	switch n {
	case 1000:
		return "1k"
	case 100000:
		return "100k"
	}
	return "n"
}
