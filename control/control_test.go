package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"

	"github.com/logjail/logjail/internal/testenv"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		key     string
		isAddr  bool
		prefix  string
		wantErr string
	}{
		{in: "203.0.113.7", key: "203.0.113.7", isAddr: true, prefix: "203.0.113.7/32"},
		{in: "2001:db8::1", key: "2001:db8::1", isAddr: true, prefix: "2001:db8::1/128"},
		{in: "::ffff:203.0.113.7", key: "203.0.113.7", isAddr: true, prefix: "203.0.113.7/32"},
		{in: "203.0.113.0/24", key: "203.0.113.0/24", prefix: "203.0.113.0/24"},
		{in: "203.0.113.7/32", key: "203.0.113.7", isAddr: true, prefix: "203.0.113.7/32"},
		{in: "2001:db8:1:2::/64", key: "2001:db8:1:2::/64", prefix: "2001:db8:1:2::/64"},
		{in: "user:bob", key: "user:bob"},
		{in: "ua:Mozilla/5.0 (X11)", key: "ua:Mozilla/5.0 (X11)"},
		{in: "range:googlebot", key: "range:googlebot"},
		{in: "203.0.113.7|ua:curl/8", key: "203.0.113.7|ua:curl/8"},
		{in: "", wantErr: "no address"},
		{in: "300.1.1.1", wantErr: "not an address or CIDR"},
		{in: "203.0.113.7/33", wantErr: "not an address or CIDR"},
		{in: "10.1.2.3/8", wantErr: "did you mean 10.0.0.0/8"},
		{in: "fe80::1%eth0", wantErr: "zone"},
		{in: "bob", wantErr: "not an address, a CIDR or a key"},
		{in: "user:", wantErr: "not an address, a CIDR or a key"},
		{in: "user:a\nb", wantErr: "not an address, a CIDR or a key"},
		{in: "nothere|ua:x", wantErr: "not an address, a CIDR or a key"},
		{in: "2001:db8::zz|ua:x", wantErr: "not an address"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTarget(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrBadRequest) {
					t.Fatalf("err = %v, want one saying %q wrapping ErrBadRequest", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := ""
			if got.Prefix.IsValid() {
				p = got.Prefix.String()
			}
			if got.Key != tt.key || got.IsAddr != tt.isAddr || p != tt.prefix {
				t.Errorf("got key %q addr %v prefix %q; want %q %v %q", got.Key, got.IsAddr, p, tt.key, tt.isAddr, tt.prefix)
			}
		})
	}
}

func TestParseFor(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "1h": time.Hour, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour} {
		if got, err := ParseFor(in); err != nil || got != want {
			t.Errorf("ParseFor(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0s", "-1h", "soon", "1x", "40000d"} {
		if _, err := ParseFor(in); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseFor(%q): %v, want ErrBadRequest", in, err)
		}
	}
}

const testConfig = `sources:
  - name: web
    paths: [/x.log]
    format: combined
ranges:
  office:
    cidrs: [198.51.100.0/24]
    group: true
    limits: ["100 per second"]
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
`

func testCfg(t testing.TB) *rules.Config {
	t.Helper()
	cfg, err := rules.Parse("test.yaml", []byte(testConfig), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestMatches(t *testing.T) {
	cfg := testCfg(t)
	bob := []netip.Addr{netip.MustParseAddr("203.0.113.7")}
	tests := []struct {
		target, key string
		addrs       []netip.Addr
		want        bool
	}{
		{"203.0.113.7", "203.0.113.7", nil, true},
		{"203.0.113.7", "203.0.113.0/24", nil, true},
		{"203.0.113.7", "203.0.0.0/16", nil, true},
		{"203.0.113.7", "203.0.113.8", nil, false},
		{"203.0.113.7", "user:bob", bob, true},
		{"203.0.113.8", "user:bob", bob, false},
		{"203.0.113.7", "203.0.113.7|ua:curl", nil, true},
		{"198.51.100.4", "range:office", nil, true},
		{"203.0.113.7", "range:office", nil, false},
		{"203.0.113.0/24", "203.0.113.7", nil, true},
		{"203.0.113.0/24", "203.0.0.0/16", nil, true},
		{"203.0.113.0/24", "203.0.114.0/24", nil, false},
		{"203.0.113.0/24", "user:bob", bob, true},
		{"user:bob", "user:bob", nil, true},
		{"user:bob", "user:bobby", nil, false},
	}
	for _, tt := range tests {
		tg, err := ParseTarget(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.Matches(cfg, tt.key, tt.addrs); got != tt.want {
			t.Errorf("%s matches %s (%v) = %v, want %v", tt.target, tt.key, tt.addrs, got, tt.want)
		}
	}
}

func TestFmtWho(t *testing.T) {
	if got := Who(0, "root"); got != "uid 0 (root)" {
		t.Errorf("Who = %q", got)
	}
	if got := Who(4242, ""); got != "uid 4242" {
		t.Errorf("Who = %q", got)
	}
}

// fakeDaemon records what the server asks of it.
type fakeDaemon struct {
	statusErr error // what Status fails with, if not nil
	cfg       *rules.Config
	bans      []string
	resets    []string // who reset the breaker
}

func (f *fakeDaemon) Ban(_ context.Context, req BanRequest, who string) (*BanResult, error) {
	if _, err := ParseTarget(req.Key); err != nil {
		return nil, err
	}
	f.bans = append(f.bans, req.Key+" by "+who)
	return &BanResult{Version: SchemaVersion, Ban: Ban{Key: req.Key, Who: who}, Live: true}, nil
}

func (f *fakeDaemon) Lift(_ context.Context, req UnbanRequest, who string) (*UnbanResult, error) {
	return nil, errf(ErrNotFound, "nothing matches %s", req.Key)
}

func (f *fakeDaemon) Status(context.Context) (*Status, error) {
	if f.statusErr != nil {
		return nil, f.statusErr
	}
	return &Status{Version: SchemaVersion, Live: true, Logjail: "test"}, nil
}

func (f *fakeDaemon) Top(context.Context, TopRequest) (*Top, error) {
	return &Top{Version: SchemaVersion, Live: true, Keys: []TopKey{}}, nil
}

func (f *fakeDaemon) Config(context.Context) (*rules.Config, error) { return f.cfg, nil }

func (f *fakeDaemon) Breaker(context.Context) (*BreakerStatus, error) {
	return &BreakerStatus{Version: SchemaVersion, Live: true, Breaker: Breaker{Open: true, Trips: 1}, Events: []Event{}}, nil
}

func (f *fakeDaemon) ResetBreaker(_ context.Context, who string) (*BreakerResetResult, error) {
	f.resets = append(f.resets, who)
	return &BreakerResetResult{Version: SchemaVersion, WasOpen: true, Live: true}, nil
}

func serve(t *testing.T, d Daemon) (*Server, *Client) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "control.sock")
	srv, err := Listen(ServerOptions{Path: path, Daemon: d})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("the socket is left after Serve")
		}
	})
	c := NewClient(path)
	t.Cleanup(c.Close)
	return srv, c
}

func TestServer(t *testing.T) {
	f := &fakeDaemon{cfg: testCfg(t)}
	srv, c := serve(t, f)
	fi, err := os.Stat(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != socketMode || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, want a socket, 0660", fi.Mode())
	}
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil || !st.Live || st.Logjail != "test" {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	res, err := c.Ban(ctx, BanRequest{Key: "203.0.113.7", For: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	me := Who(uint32(os.Getuid()), "")
	if !strings.HasPrefix(res.Ban.Who, me) {
		t.Errorf("who = %q, want the caller's uid (%s...)", res.Ban.Who, me)
	}
	// Errors come back as the API's errors.
	if _, err := c.Ban(ctx, BanRequest{Key: "bob", For: "1h"}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `"bob"`) {
		t.Errorf("bad ban: %v", err)
	}
	if _, err := c.Unban(ctx, UnbanRequest{Key: "203.0.113.7"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unban: %v", err)
	}
	if r, err := c.ResetBreaker(ctx); err != nil || !r.WasOpen || len(f.resets) != 1 || !strings.HasPrefix(f.resets[0], me) {
		t.Errorf("breaker reset: %+v, %v; the daemon heard %v, want one by %s", r, err, f.resets, me)
	}
	if b, err := c.Breaker(ctx); err != nil || !b.Live || !b.Breaker.Open {
		t.Errorf("breaker: %+v, %v", b, err)
	}
	if _, err := c.List(ctx, ListQuery{Kind: "nope"}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("list --kind nope: %v", err)
	}
	// A second server on the same socket is refused; a stale one replaced.
	if _, err := Listen(ServerOptions{Path: srv.Path(), Daemon: f}); err == nil || !strings.Contains(err.Error(), "another logjail") {
		t.Errorf("a second Listen: %v", err)
	}
}

func TestServerStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	s1, err := Listen(ServerOptions{Path: path, Daemon: &fakeDaemon{}})
	if err != nil {
		t.Fatal(err)
	}
	s1.l.Close() // a crashed daemon: the file stays, no one listens
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	s2, err := Listen(ServerOptions{Path: path, Daemon: &fakeDaemon{}})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	s2.Close()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(ServerOptions{Path: path, Daemon: &fakeDaemon{}}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file: %v", err)
	}
}

func TestClientNoDaemon(t *testing.T) {
	c := NewClient(filepath.Join(t.TempDir(), "none.sock"))
	if _, err := c.Status(context.Background()); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Status without a daemon: %v, want ErrNoDaemon", err)
	}
}

// TestServerRefusesOthers: a caller that is neither root nor in the group
// gets 403 for a change even when the socket lets it connect; reads stay
// open to whoever may connect. The caller is this test binary run as
// nobody (TestHelperNobody).
func TestServerRefusesOthers(t *testing.T) {
	testenv.Root(t, "runs a client as nobody")
	testenv.Need(t, "setpriv")
	f := &fakeDaemon{cfg: testCfg(t)}
	dir, err := os.MkdirTemp("", "logjail-ctl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "control.sock")
	srv, err := Listen(ServerOptions{Path: path, Daemon: f})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary must be readable by nobody: copy it out of the
	// build cache's 0700 directory.
	bin := filepath.Join(dir, "control.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := func() string {
		cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", bin, "-test.run=^TestHelperNobody$")
		cmd.Env = append(os.Environ(), "LOGJAIL_TEST_SOCKET="+path)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := asNobody(); !strings.Contains(out, "status: "+ErrSocketDenied.Error()) || !strings.Contains(out, "ban: "+ErrSocketDenied.Error()) {
		t.Errorf("nobody, socket 0660: %s", out)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	out := asNobody()
	if !strings.Contains(out, "ban: forbidden: uid 65534 (nobody) may not change anything") || !strings.Contains(out, "status: ok") ||
		!strings.Contains(out, "breaker reset: forbidden: uid 65534 (nobody)") || !strings.Contains(out, "breaker status: ok") {
		t.Errorf("nobody, socket 0666: %s", out)
	}
	if len(f.bans) != 0 || len(f.resets) != 0 {
		t.Errorf("nobody's ban or reset reached the daemon: %v %v", f.bans, f.resets)
	}
}

// TestHelperNobody is the client of TestServerRefusesOthers.
func TestHelperNobody(t *testing.T) {
	path := os.Getenv("LOGJAIL_TEST_SOCKET")
	if path == "" {
		return // a helper of TestServerRefusesOthers: alone, nothing to do (not a skip)
	}
	c := NewClient(path)
	ctx := context.Background()
	report := func(what string, err error) {
		switch {
		case err == nil:
			fmt.Printf("%s: ok\n", what)
		case errors.Is(err, ErrForbidden):
			fmt.Printf("%s: forbidden: %v\n", what, err)
		case errors.Is(err, ErrSocketDenied):
			fmt.Printf("%s: %v\n", what, ErrSocketDenied)
		default:
			fmt.Printf("%s: %v\n", what, err)
		}
	}
	_, err := c.Ban(ctx, BanRequest{Key: "203.0.113.7", For: "1h"})
	report("ban", err)
	_, err = c.Status(ctx)
	report("status", err)
	_, err = c.ResetBreaker(ctx)
	report("breaker reset", err)
	_, err = c.Breaker(ctx)
	report("breaker status", err)
}

// TestBanJSON: the documented JSON of a ban, with and without an end.
func TestBanJSON(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	b := BanOf(&state.Ban{Rule: "deny", Key: "192.0.2.0/24", Kind: "ban", Since: now, Reason: "deny list", Origin: "deny"}, now)
	got, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rule":"deny","key":"192.0.2.0/24","kind":"ban","since":"2026-11-23T12:00:00Z","until":null,"left_seconds":null,"violations":0,"addresses":[],"reason":"deny list","origin":"deny","who":"","log_only":false}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	b = BanOf(&state.Ban{Rule: "operator", Key: "user:bob", Kind: "ban", Since: now, Until: now.Add(90 * time.Minute),
		Addresses: []netip.Addr{netip.MustParseAddr("203.0.113.7")}, Origin: "operator", Who: "uid 0 (root)"}, now.Add(time.Minute))
	got, _ = json.Marshal(b)
	want = `{"rule":"operator","key":"user:bob","kind":"ban","since":"2026-11-23T12:00:00Z","until":"2026-11-23T13:30:00Z","left_seconds":5340,"violations":0,"addresses":["203.0.113.7"],"reason":"","origin":"operator","who":"uid 0 (root)","log_only":false}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	// In a fleet: the node that decided it (absent above, with none).
	b = BanOf(&state.Ban{Rule: "flood", Key: "203.0.113.7", Kind: "ban", Since: now, Reason: "rate", Origin: "detector", Node: "web2"}, now)
	got, _ = json.Marshal(b)
	want = `{"rule":"flood","key":"203.0.113.7","kind":"ban","since":"2026-11-23T12:00:00Z","until":null,"left_seconds":null,"violations":0,"addresses":[],"reason":"rate","origin":"detector","who":"","log_only":false,"node":"web2"}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

// TestBanListJSON: WriteJSON writes what encoding/json does.
func TestBanListJSON(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	until := now.Add(time.Hour)
	left := int64(3600)
	l := &BanList{Version: SchemaVersion, Now: now, Expired: true, Bans: []Ban{
		{Rule: "r", Key: "ua:a\"b\\c<d>&e\x01\n\t\u2028é\xff", Kind: "ban", Since: now, Until: &until, LeftSeconds: &left,
			Violations: 3, Addresses: []string{"203.0.113.7", "2001:db8::1"}, Reason: "why", Origin: "operator", Who: "uid 0 (root)",
			LogOnly: true, Node: "web<1>\"", Ended: &until, EndReason: "lifted"},
		{Rule: "deny", Key: "192.0.2.0/24", Kind: "ban", Since: now, Addresses: []string{}},
		{Rule: "x", Key: "y"},
		{Rule: "flood", Key: "203.0.113.7", Kind: "ban", Since: now, Addresses: []string{}, Node: "web2"},
	}}
	want, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	if err := l.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want)+"\n", got.String()); diff != "" {
		t.Errorf("WriteJSON (-encoding/json +got):\n%s", diff)
	}
}

// TestDiskFullAnswers507: a call that fails because the daemon cannot
// write its database for lack of room (a ban or an unban: the write is the
// answer) is no bare 500: the client gets the daemon's words (the database,
// the disk full, what to do) and an error that errors.Is state.ErrFull; the
// server answered 507 Insufficient Storage. (The daemon's status does not
// fail so: it reports the error in its database section, see
// cmd/logjail's TestStatusDiskFull; this fake's status fails to exercise
// the mapping.)
func TestDiskFullAnswers507(t *testing.T) {
	full := fmt.Errorf("checkpoint: store: /var/lib/logjail/logjail.db: checkpoint: database or disk is full: %w", state.ErrFull)
	srv, c := serve(t, &fakeDaemon{cfg: testCfg(t), statusErr: full})
	_, err := c.Status(context.Background())
	if !errors.Is(err, state.ErrFull) || !strings.Contains(err.Error(), "/var/lib/logjail/logjail.db") || !strings.Contains(err.Error(), "free space") {
		t.Errorf("status with the disk full: %v; want state.ErrFull naming the database and what to do", err)
	}
	hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", srv.Path())
	}}}
	resp, err := hc.Get("http://logjail/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage {
		t.Errorf("HTTP status %d, want 507", resp.StatusCode)
	}
}
