package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// Daemon is what the server asks of the running daemon (daemon.Control):
// the changes and the live reads, each carried out in order with the log
// lines. Config returns the configuration in force, for the reads the
// server makes from the database itself.
type Daemon interface {
	Ban(ctx context.Context, req BanRequest, who string) (*BanResult, error)
	Lift(ctx context.Context, req UnbanRequest, who string) (*UnbanResult, error)
	Status(ctx context.Context) (*Status, error)
	Top(ctx context.Context, req TopRequest) (*Top, error)
	Config(ctx context.Context) (*rules.Config, error)
	Breaker(ctx context.Context) (*BreakerStatus, error)
	ResetBreaker(ctx context.Context, who string) (*BreakerResetResult, error)
}

// Cleaner is the daemon's optional ability to run a cleaner pass when an
// operator asks (daemon.Control): POST /v1/clean. A Daemon without it
// answers that call 404.
type Cleaner interface {
	Clean(ctx context.Context, req CleanRequest, who string) (*CleanReport, error)
}

// BatchBanner is the daemon's optional ability to make several bans as
// one (daemon.Control): POST /v1/bans/batch, `logjail import`. A Daemon
// without it answers that call 404.
type BatchBanner interface {
	BanBatch(ctx context.Context, req BatchBanRequest, who string) (*BatchBanResult, error)
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Path   string // the socket (control_socket)
	Group  string // the group that may connect and change (default "logjail")
	Daemon Daemon
	DB     state.Ledger // read for list and history
	Logger *slog.Logger
	Now    func() time.Time
	// BouncerDeleted, when set, is called after a bouncer is deleted and
	// before the answer: the APIs that serve bouncers refuse its key from
	// then on.
	BouncerDeleted func()
}

// Server serves the control API on a unix socket. The socket is mode
// 0660, owned by the daemon's user (root) and the group (where it
// exists), so only they can connect; of those, only root and the group's
// members may change anything (the caller's uid comes from the socket,
// SO_PEERCRED, and goes to the history with every change).
type Server struct {
	o   ServerOptions
	gid int // the group's id, -1 where there is none
	l   *net.UnixListener
	srv *http.Server
}

// socketMode is the control socket's mode: root and the group.
const socketMode = 0o660

// Listen creates the socket: its directory (0755) when missing; a stale
// socket (no one answers) is replaced; one a daemon answers on is an
// error. The socket is bound under a temporary name, given its mode and
// group, then renamed into place: it is never reachable with other
// permissions.
func Listen(o ServerOptions) (*Server, error) {
	if o.Group == "" {
		o.Group = state.DefaultGroup
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, gid: -1}
	if g, err := user.LookupGroup(o.Group); err == nil {
		if gid, err := strconv.Atoi(g.Gid); err == nil {
			s.gid = gid
		}
	} else {
		o.Logger.Info("control socket: no such group: only root may use the socket (contrib/systemd/logjail.sysusers creates the group)", "group", o.Group)
	}
	dir := filepath.Dir(o.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if fi, err := os.Lstat(o.Path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("control socket %s: exists and is not a socket", o.Path)
		}
		c, err := net.DialTimeout("unix", o.Path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s: another logjail answers on it", o.Path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("control socket %s: %w", o.Path, err)
		}
		if err := os.Remove(o.Path); err != nil {
			return nil, fmt.Errorf("control socket %s: removing the stale socket: %w", o.Path, err)
		}
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d", filepath.Base(o.Path), os.Getpid()))
	os.Remove(tmp)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	l.SetUnlinkOnClose(false)
	err = os.Chmod(tmp, socketMode)
	if err == nil && s.gid >= 0 {
		err = os.Chown(tmp, -1, s.gid)
	}
	if err == nil {
		err = os.Rename(tmp, o.Path)
	}
	if err != nil {
		l.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("control socket %s: %w", o.Path, err)
	}
	s.l = l
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/bans", s.bans)
	mux.HandleFunc("GET /v1/history", s.history)
	mux.HandleFunc("GET /v1/top", s.top)
	mux.HandleFunc("POST /v1/ban", s.ban)
	mux.HandleFunc("POST /v1/bans/batch", s.banBatch)
	mux.HandleFunc("POST /v1/unban", s.unban)
	mux.HandleFunc("GET /v1/breaker", s.breaker)
	mux.HandleFunc("POST /v1/breaker/reset", s.resetBreaker)
	mux.HandleFunc("POST /v1/clean", s.clean)
	mux.HandleFunc("GET /v1/bouncers", s.listBouncers)
	mux.HandleFunc("POST /v1/bouncers/add", s.addBouncer)
	mux.HandleFunc("POST /v1/bouncers/delete", s.deleteBouncer)
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.o.Path }

// Serve serves until ctx is done, then stops (requests under way get 5 s)
// and removes the socket.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.l) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.srv.Shutdown(sctx)
		cancel()
		<-errc
	}
	os.Remove(s.o.Path)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close closes the socket without serving (Listen's caller gave up).
func (s *Server) Close() error {
	os.Remove(s.o.Path)
	return s.l.Close()
}

type credKey struct{}

// peer is the caller as the socket says.
type peer struct {
	uid, gid uint32
	pid      int32
	ok       bool
}

func connContext(ctx context.Context, c net.Conn) context.Context {
	var p peer
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					p = peer{uid: cred.Uid, gid: cred.Gid, pid: cred.Pid, ok: true}
				}
			})
		}
	}
	return context.WithValue(ctx, credKey{}, p)
}

func peerOf(r *http.Request) peer {
	p, _ := r.Context().Value(credKey{}).(peer)
	return p
}

// who names the caller, or refuses: only root and the group's members may
// change anything.
func (s *Server) who(r *http.Request) (string, error) {
	p := peerOf(r)
	if !p.ok {
		return "", errf(ErrForbidden, "the caller's credentials cannot be read from the socket")
	}
	name := ""
	u, uerr := user.LookupId(strconv.FormatUint(uint64(p.uid), 10))
	if uerr == nil {
		name = u.Username
	}
	who := Who(p.uid, name)
	if p.uid == 0 || (s.gid >= 0 && int(p.gid) == s.gid) {
		return who, nil
	}
	if uerr == nil && s.gid >= 0 {
		if gids, err := u.GroupIds(); err == nil && slices.Contains(gids, strconv.Itoa(s.gid)) {
			return who, nil
		}
	}
	return "", errf(ErrForbidden, "%s may not change anything: root and the members of group %s may", who, s.o.Group)
}

// changer names the caller of a change (what), or answers the refusal
// and reports false.
func (s *Server) changer(w http.ResponseWriter, r *http.Request, what string) (string, bool) {
	who, err := s.who(r)
	if err != nil {
		s.o.Logger.Warn("control: refused", "what", what, "err", err)
		reply(w, nil, err)
		return "", false
	}
	return who, true
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.o.Daemon.Status(r.Context())
	reply(w, st, err)
}

func (s *Server) bans(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := ListQuery{Rule: v.Get("rule"), Key: v.Get("key"), Kind: v.Get("kind"), Sort: v.Get("sort"), Expired: v.Get("expired") == "true"}
	cfg, err := s.o.Daemon.Config(r.Context())
	if err != nil {
		reply(w, nil, err)
		return
	}
	l, err := List(s.o.DB, cfg, q, s.o.Now())
	reply(w, l, err)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	cfg, err := s.o.Daemon.Config(r.Context())
	if err != nil {
		reply(w, nil, err)
		return
	}
	h, err := ReadHistory(s.o.DB, cfg, r.URL.Query().Get("key"))
	reply(w, h, err)
}

func (s *Server) top(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := TopRequest{Rule: v.Get("rule"), By: v.Get("by")}
	if n := v.Get("n"); n != "" {
		var err error
		if q.N, err = strconv.Atoi(n); err != nil || q.N < 0 {
			reply(w, nil, errf(ErrBadRequest, "n=%q: want a count", n))
			return
		}
	}
	t, err := s.o.Daemon.Top(r.Context(), q)
	reply(w, t, err)
}

func (s *Server) ban(w http.ResponseWriter, r *http.Request) {
	who, ok := s.changer(w, r, "ban")
	if !ok {
		return
	}
	var req BanRequest
	if err := decode(r, &req); err != nil {
		reply(w, nil, err)
		return
	}
	res, err := s.o.Daemon.Ban(r.Context(), req, who)
	if err == nil {
		// The decision itself is the daemon's decision log's line (msg "ban").
		s.o.Logger.Debug("control request", "what", "ban", "who", who, "rule", res.Ban.Rule, "key", res.Ban.Key, "for", req.For, "reason", res.Ban.Reason, "forced", res.Allowed != "")
	}
	reply(w, res, err)
}

func (s *Server) banBatch(w http.ResponseWriter, r *http.Request) {
	who, ok := s.changer(w, r, "batch ban")
	if !ok {
		return
	}
	b, ok := s.o.Daemon.(BatchBanner)
	if !ok {
		reply(w, nil, errf(ErrNotFound, "this daemon makes no batch of bans"))
		return
	}
	var req BatchBanRequest
	if err := decodeLimit(r, &req, maxBatchBody); err != nil {
		reply(w, nil, err)
		return
	}
	res, err := b.BanBatch(r.Context(), req, who)
	if err == nil {
		// Each ban is the daemon's decision log's line (msg "ban").
		s.o.Logger.Info("operator batch ban", "who", who, "bans", len(res.Bans))
	}
	reply(w, res, err)
}

func (s *Server) unban(w http.ResponseWriter, r *http.Request) {
	who, ok := s.changer(w, r, "unban")
	if !ok {
		return
	}
	var req UnbanRequest
	if err := decode(r, &req); err != nil {
		reply(w, nil, err)
		return
	}
	res, err := s.o.Daemon.Lift(r.Context(), req, who)
	if err == nil {
		// Each ban lifted is the daemon's decision log's line (msg "unban").
		s.o.Logger.Debug("control request", "what", "unban", "who", who, "target", describe(req), "removed", len(res.Removed), "forgotten", len(res.Forgotten))
	}
	reply(w, res, err)
}

func (s *Server) breaker(w http.ResponseWriter, r *http.Request) {
	b, err := s.o.Daemon.Breaker(r.Context())
	reply(w, b, err)
}

func (s *Server) resetBreaker(w http.ResponseWriter, r *http.Request) {
	who, ok := s.changer(w, r, "breaker reset")
	if !ok {
		return
	}
	res, err := s.o.Daemon.ResetBreaker(r.Context(), who)
	if err == nil {
		s.o.Logger.Info("operator breaker reset", "who", who, "was_open", res.WasOpen)
	}
	reply(w, res, err)
}

func (s *Server) clean(w http.ResponseWriter, r *http.Request) {
	who, ok := s.changer(w, r, "clean")
	if !ok {
		return
	}
	c, ok := s.o.Daemon.(Cleaner)
	if !ok {
		reply(w, nil, errf(ErrNotFound, "this daemon runs no cleaner pass on request"))
		return
	}
	var req CleanRequest
	if err := decode(r, &req); err != nil {
		reply(w, nil, err)
		return
	}
	res, err := c.Clean(r.Context(), req, who)
	if err == nil {
		// Each ban lifted is the daemon's decision log's line (msg "unban").
		s.o.Logger.Info("operator clean", "who", who, "expired", res.Expired, "keys_pruned", res.Keys, "history_pruned", res.History)
	}
	reply(w, res, err)
}

func decode(r *http.Request, v any) error { return decodeLimit(r, v, 64<<10) }

// decodeLimit decodes a request body of at most limit bytes into v.
func decodeLimit(r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errf(ErrBadRequest, "request body: %v", err)
	}
	return nil
}

// errorBody is what the server answers an error with.
type errorBody struct {
	Error string `json:"error"`
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(httpStatus(err))
		json.NewEncoder(w).Encode(errorBody{Error: err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// query encodes a list query for GET /v1/bans.
func (q ListQuery) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("rule", q.Rule)
	set("key", q.Key)
	set("kind", q.Kind)
	set("sort", q.Sort)
	if q.Expired {
		v.Set("expired", "true")
	}
	return v
}
