package crowdsec

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/state"
)

// keysTTL is how long the bouncers read from the database serve: a key
// deleted with `logjail bouncers` is refused within it. An unknown key
// makes the API read them again at once (a key just added works at once).
const keysTTL = time.Second

// API is the CrowdSec decisions API of one `type: crowdsec` action: an
// actions.Backend that the manager keeps current (every ban, throttle and
// unban the other actions see, as decisions), and the HTTP handler the
// bouncers pull from. Its methods are safe for concurrent use.
type API struct {
	cfg actions.CrowdsecConfig
	db  state.Bouncers
	now func() time.Time
	log *slog.Logger

	mu       sync.Mutex
	seq      int64                     // the last sequence number given
	active   map[string]*decision      // by value
	order    []*decision               // the active decisions by ID, and some removed since (skipped: not in active)
	pieces   map[netip.Prefix][]string // the values each entry made (more than one: split around exemptions)
	removed  []*decision               // by removal
	allow    []netip.Prefix            // the exemptions of the last Sync
	bouncers []state.Bouncer
	readAt   time.Time // when bouncers were read
}

// Options are what an API needs besides its configuration.
type Options struct {
	DB     state.Bouncers
	Now    func() time.Time // the wall clock (default time.Now)
	Logger *slog.Logger
}

// New returns the API of cfg, with the decisions the database kept: until
// the manager's first Sync it serves what it served before a restart.
func New(cfg actions.CrowdsecConfig, o Options) (*API, error) {
	a := &API{cfg: cfg, db: o.DB, now: o.Now, log: o.Logger, active: map[string]*decision{}, pieces: map[netip.Prefix][]string{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	ds, err := a.db.BouncerDecisions()
	if err != nil {
		return nil, err
	}
	for i := range ds {
		d := &ds[i]
		a.seq = max(a.seq, d.ID, d.Deleted)
		if d.Deleted == 0 {
			a.active[d.Value] = d
			a.order = append(a.order, d) // the database gives them by ID
			if p, err := parseValue(d.Value); err == nil {
				a.pieces[p] = append(a.pieces[p], d.Value) // until the manager's first Sync says how entries split
			}
		} else {
			a.removed = append(a.removed, d)
		}
	}
	slices.SortFunc(a.removed, func(x, y *decision) int { return cmp.Compare(x.Deleted, y.Deleted) })
	bs, err := a.db.ListBouncers()
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		a.seq = max(a.seq, b.LastSeq) // never hand out a number a bouncer has passed
	}
	a.bouncers, a.readAt = bs, a.now()
	return a, nil
}

// NewKey returns a new API key (32 random bytes, hex) and its hash, the
// only thing the database keeps.
func NewKey() (key string, hash [32]byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", hash, err
	}
	key = hex.EncodeToString(b[:])
	return key, HashKey(key), nil
}

// HashKey is the hash a key is kept as.
func HashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// Handler serves the bouncer side of CrowdSec's local API.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/decisions/stream", a.stream) // GET serves HEAD too
	mux.HandleFunc("GET /v1/decisions", a.list)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"up"}`))
	})
	return mux
}

// Listen listens on the configured address.
func Listen(cfg actions.CrowdsecConfig) (net.Listener, error) {
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("tls_cert %s, tls_key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	return l, nil
}

// Serve serves the API on l until ctx is done (requests under way are
// answered), then returns nil.
func (a *API) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}

// forbidden is CrowdSec's answer to a request without a known key: its
// middleware's 403 and body.
func forbidden(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(`{"message":"access forbidden"}`))
}

// auth returns the bouncer whose key the request carries (X-Api-Key). The
// hash is compared with every bouncer's in constant time. a.mu is held.
func (a *API) auth(r *http.Request) (int, bool) {
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		return 0, false
	}
	now := a.now()
	if now.Sub(a.readAt) >= keysTTL || now.Before(a.readAt) {
		a.readBouncers(now)
	}
	h := HashKey(key)
	found := a.find(h)
	if found < 0 && a.readAt != now {
		// A key added since the last read works at once: a bouncer
		// started right after `bouncers add` would otherwise be refused
		// its first pull, and quit.
		a.readBouncers(now)
		found = a.find(h)
	}
	return found, found >= 0
}

// Reread makes the next request read the bouncers from the database
// again: the daemon calls it when `logjail bouncers delete` asks it, so
// that the deleted key is refused from the moment the command returns
// (one deleted on the database alone is refused within keysTTL).
func (a *API) Reread() {
	a.mu.Lock()
	a.readAt = time.Time{}
	a.mu.Unlock()
}

// readBouncers reads the bouncers from the database. a.mu is held.
func (a *API) readBouncers(now time.Time) {
	bs, err := a.db.ListBouncers()
	if err != nil {
		a.log.Warn("reading the bouncers", "err", err)
		return
	}
	a.bouncers, a.readAt = bs, now
}

// find returns the index of the bouncer whose key hashes to h, or -1,
// comparing with every bouncer in constant time. a.mu is held.
func (a *API) find(h [32]byte) int {
	found := -1
	for i := range a.bouncers {
		if subtle.ConstantTimeCompare(h[:], a.bouncers[i].KeyHash[:]) == 1 {
			found = i
		}
	}
	return found
}

// filter is a request's filters, as CrowdSec reads them.
type filter struct {
	scopes, origins, types, values []string
	containing, notContaining      []string
	addr                           netip.Prefix // ip= or range=
	contains                       bool         // the decision contains addr (default), else addr contains it
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func parseFilter(r *http.Request) (filter, error) {
	q := r.URL.Query()
	f := filter{contains: true,
		origins: splitList(q.Get("origins")), containing: splitList(q.Get("scenarios_containing")),
		notContaining: splitList(q.Get("scenarios_not_containing"))}
	for _, k := range []string{"scopes", "scope"} {
		for _, s := range splitList(q.Get(k)) {
			f.scopes = append(f.scopes, strings.ToLower(s))
		}
	}
	if v := q.Get("type"); v != "" {
		f.types = []string{v}
	}
	if v := q.Get("value"); v != "" {
		f.values = []string{v}
	}
	if v := q.Get("contains"); v != "" {
		f.contains = v == "true" || v == "1"
	}
	for _, k := range []string{"ip", "range"} {
		v := q.Get(k)
		if v == "" {
			continue
		}
		p, err := parseValue(v)
		if err != nil {
			return f, fmt.Errorf("unable to convert '%s' to int: invalid ip address / range", v)
		}
		f.addr = p.Masked()
	}
	return f, nil
}

func (f *filter) match(d *decision) bool {
	if len(f.scopes) > 0 && !slices.Contains(f.scopes, strings.ToLower(d.Scope)) {
		return false
	}
	if len(f.origins) > 0 && !slices.Contains(f.origins, Origin) {
		return false
	}
	if len(f.types) > 0 && !slices.Contains(f.types, d.Type) {
		return false
	}
	if len(f.values) > 0 && !slices.Contains(f.values, d.Value) {
		return false
	}
	has := func(words []string) bool {
		sc := strings.ToLower(d.Scenario)
		for _, w := range words {
			if strings.Contains(sc, strings.ToLower(w)) {
				return true
			}
		}
		return false
	}
	if len(f.containing) > 0 && !has(f.containing) {
		return false
	}
	if len(f.notContaining) > 0 && has(f.notContaining) {
		return false
	}
	if f.addr.IsValid() {
		p, err := parseValue(d.Value)
		if err != nil || p.Addr().Is4() != f.addr.Addr().Is4() {
			return false
		}
		if f.contains {
			return p.Bits() <= f.addr.Bits() && p.Contains(f.addr.Addr())
		}
		return f.addr.Bits() <= p.Bits() && f.addr.Contains(p.Addr())
	}
	return true
}

// wire is a decision as CrowdSec's models.Decision writes it (the v1 API
// sends no until).
type wire struct {
	Duration string `json:"duration"`
	ID       int64  `json:"id"`
	Origin   string `json:"origin"`
	Scenario string `json:"scenario"`
	Scope    string `json:"scope"`
	Type     string `json:"type"`
	Value    string `json:"value"`
}

func toWire(d *decision, now time.Time) wire {
	until := d.Until
	if until.IsZero() {
		until = now.Add(forever)
	}
	return wire{Duration: until.Sub(now).Round(time.Second).String(), ID: d.ID, Origin: Origin,
		Scenario: d.Scenario, Scope: d.Scope, Type: d.Type, Value: d.Value}
}

func peerIP(r *http.Request) string {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap().String()
	}
	return r.RemoteAddr
}

// stream is GET (and HEAD) /v1/decisions/stream: with startup=true every
// active decision as new and nothing deleted; else what changed since
// the bouncer's last pull.
func (a *API) stream(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	bi, ok := a.auth(r)
	if !ok {
		a.mu.Unlock()
		forbidden(w)
		return
	}
	if r.Method == http.MethodHead {
		a.mu.Unlock()
		w.WriteHeader(http.StatusOK) // as CrowdSec: no body, the last pull not moved
		return
	}
	f, err := parseFilter(r)
	if err != nil {
		a.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": err.Error()})
		return
	}
	if len(f.scopes) == 0 {
		f.scopes = []string{"ip", "range"} // CrowdSec's default for the stream
	}
	b := a.bouncers[bi]
	now := a.now()
	startup := r.URL.Query().Get("startup") == "true"
	since := b.LastSeq
	if startup {
		since = 0
	}
	var news, deleted []*decision
	i, _ := slices.BinarySearchFunc(a.order, since+1, func(d *decision, id int64) int { return cmp.Compare(d.ID, id) })
	for _, d := range a.order[i:] {
		if a.active[d.Value] == d && live(d, now) && f.match(d) {
			news = append(news, d)
		}
	}
	if !startup {
		// What was removed since the last pull, of what the bouncer had
		// (made before it): a removal whose value is active again with the
		// same type is no removal for the bouncer.
		i, _ := slices.BinarySearchFunc(a.removed, since+1, func(d *decision, s int64) int { return cmp.Compare(d.Deleted, s) })
		for _, d := range a.removed[i:] {
			if d.ID > since {
				continue
			}
			if cur, ok := a.active[d.Value]; ok && cur.Type == d.Type {
				continue
			}
			if f.match(d) {
				deleted = append(deleted, d)
			}
		}
	}
	seq := a.seq
	a.mu.Unlock()

	// Decisions are never changed once made: they are written out of
	// the lock.
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"new":`)
	writeDecisions(bw, news, now)
	bw.WriteString(`,"deleted":`)
	writeDecisions(bw, deleted, now)
	bw.WriteString(`}`)
	if err := bw.Flush(); err != nil {
		return // not received: the last pull stays, the next one repeats it
	}
	a.pulled(b.Name, now, seq, peerIP(r), r.UserAgent())
}

// live reports whether d has not ended at now: one past its end that the
// manager has not yet lifted (it sweeps every second) is not sent as new
// (a bouncer would get a negative duration); its removal follows.
func live(d *decision, now time.Time) bool { return d.Until.IsZero() || d.Until.After(now) }

// writeDecisions writes ds as a JSON array ([] for none), one
// decision at a time.
func writeDecisions(bw *bufio.Writer, ds []*decision, now time.Time) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	bw.WriteByte('[')
	for i, d := range ds {
		if i > 0 {
			bw.WriteByte(',')
		}
		buf.Reset()
		enc.Encode(toWire(d, now))
		bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) // compact, as CrowdSec writes it
	}
	bw.WriteByte(']')
}

// pulled records a pull, in memory and in the database.
func (a *API) pulled(name string, at time.Time, seq int64, ip, ua string) {
	if err := a.db.SetBouncerPull(name, at, seq, ip, ua); err != nil {
		a.log.Warn("recording a bouncer's pull", "bouncer", name, "err", err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.bouncers {
		if a.bouncers[i].Name == name {
			b := &a.bouncers[i]
			b.LastPull, b.LastSeq, b.IP, b.UserAgent = at, seq, ip, ua
		}
	}
}

// list is GET (and HEAD) /v1/decisions: the active decisions the filters
// match, null for none (as CrowdSec answers).
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	bi, ok := a.auth(r)
	if !ok {
		a.mu.Unlock()
		forbidden(w)
		return
	}
	f, err := parseFilter(r)
	if err != nil {
		a.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": err.Error()})
		return
	}
	now := a.now()
	var out []wire
	for _, d := range a.order {
		if a.active[d.Value] == d && live(d, now) && f.match(d) {
			out = append(out, toWire(d, now))
		}
	}
	b := a.bouncers[bi]
	a.mu.Unlock()
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	writeJSON(w, http.StatusOK, out)
	if now.Sub(b.LastPull) >= time.Minute { // as CrowdSec: at most once a minute
		a.pulled(b.Name, now, b.LastSeq, peerIP(r), r.UserAgent())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
