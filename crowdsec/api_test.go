package crowdsec_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/crowdsec"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// clock is a settable wall clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// wireDecision is what go-cs-bouncer's models.Decision reads.
type wireDecision struct {
	Duration *string `json:"duration"`
	ID       int64   `json:"id"`
	Origin   *string `json:"origin"`
	Scenario *string `json:"scenario"`
	Scope    *string `json:"scope"`
	Type     *string `json:"type"`
	Value    *string `json:"value"`
}

// short is a decision as the tests compare it.
type short struct{ Value, Scope, Type, Scenario, Duration string }

func shorten(t *testing.T, ds []wireDecision) []short {
	t.Helper()
	var out []short
	for _, d := range ds {
		if d.Duration == nil || d.Origin == nil || d.Scenario == nil || d.Scope == nil || d.Type == nil || d.Value == nil || d.ID <= 0 {
			t.Fatalf("decision with a field missing or id %d: %+v", d.ID, d)
		}
		if *d.Origin != "logjail" {
			t.Errorf("origin %q, want logjail", *d.Origin)
		}
		if _, err := time.ParseDuration(*d.Duration); err != nil {
			t.Errorf("duration %q: %v", *d.Duration, err)
		}
		out = append(out, short{*d.Value, *d.Scope, *d.Type, *d.Scenario, *d.Duration})
	}
	return out
}

type fixture struct {
	t     *testing.T
	db    *store.DB
	path  string
	clock *clock
	api   *crowdsec.API
	url   string
	key   string
	stop  func()
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "logjail.db"), clock: &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}}
	db, err := store.Open(f.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.db = db
	key, hash, err := crowdsec.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AddBouncer(state.Bouncer{Name: "fw", KeyHash: hash, Created: f.clock.now()}); err != nil {
		t.Fatal(err)
	}
	f.key = key
	f.start()
	t.Cleanup(func() { f.stop(); f.db.Close() })
	return f
}

func (f *fixture) start() {
	f.t.Helper()
	api, err := crowdsec.New(actions.CrowdsecConfig{Name: "crowdsec", Listen: "127.0.0.1:0", ThrottleAs: "throttle"},
		crowdsec.Options{DB: f.db, Now: f.clock.now})
	if err != nil {
		f.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx, l) }()
	f.api, f.url = api, "http://"+l.Addr().String()
	f.stop = func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("serve: %v", err)
		}
	}
}

func (f *fixture) get(path, key string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.url+path, nil)
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	req.Header.Set("User-Agent", "crowdsec-firewall-bouncer/v0.0.25-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (f *fixture) stream(query string) (news, deleted []short) {
	f.t.Helper()
	code, body := f.get("/v1/decisions/stream"+query, f.key)
	if code != 200 {
		f.t.Fatalf("stream%s: %d %s", query, code, body)
	}
	var ans struct {
		New     []wireDecision `json:"new"`
		Deleted []wireDecision `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(body), &ans); err != nil {
		f.t.Fatalf("stream%s: %v: %s", query, err, body)
	}
	return shorten(f.t, ans.New), shorten(f.t, ans.Deleted)
}

func entry(p, rule string, kind actions.Kind, until time.Time) actions.Entry {
	return actions.Entry{Prefix: netip.MustParsePrefix(p), Kind: kind, Until: until, Rule: rule}
}

func TestAuth(t *testing.T) {
	f := newFixture(t)
	for _, key := range []string{"", "0123", f.key + "0"} {
		for _, path := range []string{"/v1/decisions/stream?startup=true", "/v1/decisions?ip=198.51.100.7"} {
			code, body := f.get(path, key)
			if code != http.StatusForbidden || body != `{"message":"access forbidden"}` {
				t.Errorf("%s with key %q: %d %s, want CrowdSec's 403 {\"message\":\"access forbidden\"}", path, key, code, body)
			}
		}
	}
	if code, body := f.get("/health", ""); code != 200 || body != `{"status":"up"}` {
		t.Errorf("/health: %d %s", code, body)
	}
	// A key deleted stops working within a second; one added starts.
	if _, err := f.db.DeleteBouncer("fw"); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Second)
	if code, _ := f.get("/v1/decisions/stream?startup=true", f.key); code != http.StatusForbidden {
		t.Errorf("deleted bouncer's key: %d, want 403", code)
	}
}

func TestEmptyAnswers(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{"?startup=true", "", "?startup=false"} {
		code, body := f.get("/v1/decisions/stream"+q, f.key)
		if code != 200 || body != `{"new":[],"deleted":[]}` {
			t.Errorf("stream%s with no decisions: %d %s, want {\"new\":[],\"deleted\":[]}", q, code, body)
		}
	}
	code, body := f.get("/v1/decisions?ip=198.51.100.7", f.key)
	if code != 200 || body != "null" {
		t.Errorf("/v1/decisions with none: %d %q, want null", code, body)
	}
}

func TestStreamStartupDeltasFilters(t *testing.T) {
	f := newFixture(t)
	now := f.clock.now()
	ctx := context.Background()
	ban := entry("198.51.100.7/32", "flood", actions.KindBan, now.Add(4*time.Hour))
	rng := entry("203.0.113.0/24", "scanners", actions.KindThrottle, now.Add(90*time.Second))
	if err := f.api.Sync(ctx, []actions.Entry{ban, rng}, nil); err != nil {
		t.Fatal(err)
	}
	f.clock.add(2 * time.Second)
	news, del := f.stream("?startup=true")
	want := []short{{"198.51.100.7", "Ip", "ban", "flood", "3h59m58s"}, {"203.0.113.0/24", "Range", "throttle", "scanners", "1m28s"}}
	if diff := cmp.Diff(want, news); diff != "" || len(del) != 0 {
		t.Errorf("startup (-want +got):\n%s deleted %v", diff, del)
	}
	if news, del := f.stream(""); len(news)+len(del) != 0 {
		t.Errorf("delta right after startup: new %v deleted %v, want nothing", news, del)
	}

	// An unban and a new ban; a longer ban of the same value is a new
	// decision whose old one is not reported deleted.
	v6 := entry("2001:db8:1:2::/64", "flood", actions.KindBan, time.Time{})
	longer := ban
	longer.Until = now.Add(8 * time.Hour)
	if err := f.api.Apply(ctx, []actions.Change{{Entry: longer}, {Entry: actions.Entry{Prefix: rng.Prefix}, Delete: true}, {Entry: v6}}); err != nil {
		t.Fatal(err)
	}
	news, del = f.stream("")
	if diff := cmp.Diff([]short{{"198.51.100.7", "Ip", "ban", "flood", "7h59m58s"}, {"2001:db8:1:2::/64", "Range", "ban", "flood", "87600h0m0s"}}, news); diff != "" {
		t.Errorf("delta new (-want +got):\n%s", diff)
	}
	if len(del) != 1 || del[0].Value != "203.0.113.0/24" || del[0].Type != "throttle" {
		t.Errorf("delta deleted %v, want the range's throttle alone", del)
	}

	// Filters.
	cases := []struct {
		query string
		want  []string
	}{
		{"?startup=true&scopes=ip", []string{"198.51.100.7"}},
		{"?startup=true&scopes=Range", []string{"2001:db8:1:2::/64"}},
		{"?startup=true&origins=crowdsec,cscli", nil},
		{"?startup=true&origins=logjail", []string{"198.51.100.7", "2001:db8:1:2::/64"}},
		{"?startup=true&scenarios_containing=FLO", []string{"198.51.100.7", "2001:db8:1:2::/64"}},
		{"?startup=true&scenarios_not_containing=scan,flood", nil},
	}
	for _, c := range cases {
		news, _ := f.stream(c.query)
		var got []string
		for _, d := range news {
			got = append(got, d.Value)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("stream%s (-want +got):\n%s", c.query, diff)
		}
	}

	// /v1/decisions.
	for _, c := range []struct{ query, want string }{
		{"?ip=198.51.100.7", "198.51.100.7"},
		{"?ip=2001:db8:1:2::99", "2001:db8:1:2::/64"},
		{"?range=2001:db8:1:2:8000::/65", "2001:db8:1:2::/64"},
		{"?ip=198.51.100.8", ""},
		{"?value=198.51.100.7&type=ban&scope=ip", "198.51.100.7"},
		{"?type=captcha", ""},
	} {
		code, body := f.get("/v1/decisions"+c.query, f.key)
		var ds []wireDecision
		if err := json.Unmarshal([]byte(body), &ds); code != 200 || err != nil {
			t.Fatalf("/v1/decisions%s: %d %s %v", c.query, code, body, err)
		}
		got := ""
		if len(ds) > 0 {
			got = shorten(t, ds)[0].Value
		}
		if got != c.want || len(ds) > 1 || (c.want == "" && body != "null") {
			t.Errorf("/v1/decisions%s: %s, want %q", c.query, body, c.want)
		}
	}

	// The pull is recorded: time, address, user agent.
	bs, err := f.db.ListBouncers()
	if err != nil || len(bs) != 1 {
		t.Fatalf("bouncers %v %v", bs, err)
	}
	if b := bs[0]; !b.LastPull.Equal(f.clock.now()) || b.IP != "127.0.0.1" || b.UserAgent != "crowdsec-firewall-bouncer/v0.0.25-test" || b.LastSeq == 0 {
		t.Errorf("bouncer after pulls: %+v", b)
	}
}

// TestRestart: a bouncer's delta after a restart of logjail holds what
// changed while it was down (an unban, an expiry, a new ban).
func TestRestart(t *testing.T) {
	f := newFixture(t)
	now := f.clock.now()
	ctx := context.Background()
	a := entry("198.51.100.7/32", "flood", actions.KindBan, now.Add(time.Hour))
	b := entry("198.51.100.8/32", "flood", actions.KindBan, now.Add(time.Hour))
	if err := f.api.Sync(ctx, []actions.Entry{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	f.stream("?startup=true")
	f.stop()

	f.start() // logjail restarts: the manager syncs what it has now
	c := entry("198.51.100.9/32", "scanners", actions.KindBan, now.Add(time.Hour))
	if err := f.api.Sync(ctx, []actions.Entry{b, c}, nil); err != nil {
		t.Fatal(err)
	}
	news, del := f.stream("")
	if len(news) != 1 || news[0].Value != "198.51.100.9" || len(del) != 1 || del[0].Value != "198.51.100.7" {
		t.Errorf("delta after a restart: new %v deleted %v, want 198.51.100.9 new and 198.51.100.7 deleted", news, del)
	}
	if news, del := f.stream(""); len(news)+len(del) != 0 {
		t.Errorf("second delta: new %v deleted %v, want nothing", news, del)
	}
	// A restart before the manager's first Sync serves what was served.
	f.stop()
	f.start()
	news, _ = f.stream("?startup=true")
	if len(news) != 2 {
		t.Errorf("startup after a restart, before any Sync: %v, want the two bans", news)
	}
}

// TestExemptions: an allowed address inside a banned range splits it.
func TestExemptions(t *testing.T) {
	f := newFixture(t)
	e := entry("198.51.100.0/24", "flood", actions.KindBan, f.clock.now().Add(time.Hour))
	if err := f.api.Sync(context.Background(), []actions.Entry{e}, []netip.Prefix{netip.MustParsePrefix("198.51.100.64/26")}); err != nil {
		t.Fatal(err)
	}
	news, _ := f.stream("?startup=true")
	var got []string
	for _, d := range news {
		got = append(got, d.Value)
	}
	want := []string{"198.51.100.0/26", "198.51.100.128/25"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("range with an allowed /26 inside (-want +got):\n%s", diff)
	}
}

// TestPrune: a removal every bouncer has pulled is dropped from the
// database at the next change; one a bouncer has not pulled stays.
func TestPrune(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	until := f.clock.now().Add(time.Hour)
	a, b := entry("198.51.100.7/32", "flood", actions.KindBan, until), entry("198.51.100.8/32", "flood", actions.KindBan, until)
	if err := f.api.Sync(ctx, []actions.Entry{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	f.stream("?startup=true")
	if err := f.api.Apply(ctx, []actions.Change{{Entry: actions.Entry{Prefix: a.Prefix}, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	rows := func() (active, removed int) {
		ds, err := f.db.BouncerDecisions()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Deleted == 0 {
				active++
			} else {
				removed++
			}
		}
		return active, removed
	}
	if act, rem := rows(); act != 1 || rem != 1 {
		t.Fatalf("before the pull: %d active, %d removed rows, want 1 and 1", act, rem)
	}
	if _, del := f.stream(""); len(del) != 1 {
		t.Fatalf("delta: deleted %v", del)
	}
	if err := f.api.Apply(ctx, []actions.Change{{Entry: entry("198.51.100.9/32", "flood", actions.KindBan, until)}}); err != nil {
		t.Fatal(err)
	}
	if act, rem := rows(); act != 2 || rem != 0 {
		t.Errorf("after every bouncer pulled the removal: %d active, %d removed rows, want 2 and 0", act, rem)
	}
}

// TestTLS: with tls_cert and tls_key the API answers HTTPS only.
func TestTLS(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	certs := testenv.WriteCerts(t, dir)
	certFile, keyFile, pool := certs.Cert, certs.Key, certs.Pool
	cfg := actions.CrowdsecConfig{Name: "tls", Listen: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile, ThrottleAs: "throttle"}
	api, err := crowdsec.New(cfg, crowdsec.Options{DB: f.db})
	if err != nil {
		t.Fatal(err)
	}
	l, err := crowdsec.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", "https://"+l.Addr().String()+"/v1/decisions/stream?startup=true", nil)
	req.Header.Set("X-Api-Key", f.key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `{"new":[],"deleted":[]}` {
		t.Errorf("over HTTPS: %d %s", resp.StatusCode, b)
	}
	if resp, err := http.Get("http://" + l.Addr().String() + "/health"); err == nil && resp.StatusCode == 200 {
		resp.Body.Close()
		t.Errorf("plain HTTP answered 200 on a TLS listener")
	}
	if _, err := crowdsec.Listen(actions.CrowdsecConfig{Listen: "127.0.0.1:0", TLSCert: certFile, TLSKey: filepath.Join(dir, "none.key")}); err == nil || !strings.Contains(err.Error(), "none.key") {
		t.Errorf("a missing key file: %v, want an error naming it", err)
	}
}

// TestNested: a ban of a prefix and a ban of an address inside it are two
// decisions; changing or lifting the prefix's leaves the address's. A
// decision past its end is not sent as new.
func TestNested(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.clock.now()
	wide := entry("198.51.100.0/24", "scanners", actions.KindBan, now.Add(time.Hour))
	one := entry("198.51.100.7/32", "flood", actions.KindBan, now.Add(time.Hour))
	if err := f.api.Sync(ctx, []actions.Entry{wide, one}, nil); err != nil {
		t.Fatal(err)
	}
	f.stream("?startup=true")
	longer := wide
	longer.Until = now.Add(2 * time.Hour)
	if err := f.api.Apply(ctx, []actions.Change{{Entry: longer}}); err != nil {
		t.Fatal(err)
	}
	if err := f.api.Apply(ctx, []actions.Change{{Entry: actions.Entry{Prefix: wide.Prefix}, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	news, _ := f.stream("?startup=true")
	if len(news) != 1 || news[0].Value != "198.51.100.7" {
		t.Errorf("after the prefix's ban changed and was lifted: %v, want 198.51.100.7's alone", news)
	}
	f.clock.add(time.Hour)
	if news, _ := f.stream("?startup=true"); len(news) != 0 {
		t.Errorf("past its end: %v, want nothing new", news)
	}
	if code, body := f.get("/v1/decisions?ip=198.51.100.7", f.key); body != "null" {
		t.Errorf("/v1/decisions past its end: %d %s, want null", code, body)
	}
}
