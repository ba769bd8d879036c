package control

import (
	"context"
	"net/http"
	"regexp"
	"time"

	"github.com/logjail/logjail/crowdsec"
	"github.com/logjail/logjail/state"
)

// BouncerInfo is a CrowdSec bouncer as `bouncers list` and `status` show
// it: never its key, which only `bouncers add` prints, once.
type BouncerInfo struct {
	Name      string     `json:"name"`
	Created   time.Time  `json:"created"`
	LastPull  *time.Time `json:"last_pull"` // null: never pulled
	IP        string     `json:"ip"`
	UserAgent string     `json:"user_agent"`
}

// BouncerRequest names a bouncer to add or delete.
type BouncerRequest struct {
	Name string `json:"name"`
}

// BouncerAdded is the answer to an add: the key, shown this once.
type BouncerAdded struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// BouncerList is the answer to a list.
type BouncerList struct {
	Bouncers []BouncerInfo `json:"bouncers"`
}

var bouncerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// bouncersOf is the bouncers' table of db, or an error saying it has none.
func bouncersOf(db any) (state.Bouncers, error) {
	b, ok := db.(state.Bouncers)
	if !ok {
		return nil, errf(ErrBadRequest, "this state backend keeps no bouncers")
	}
	return b, nil
}

// ListBouncers lists the bouncers of db, by name.
func ListBouncers(db any) (*BouncerList, error) {
	b, err := bouncersOf(db)
	if err != nil {
		return nil, err
	}
	bs, err := b.ListBouncers()
	if err != nil {
		return nil, err
	}
	out := &BouncerList{Bouncers: []BouncerInfo{}}
	for _, x := range bs {
		bi := BouncerInfo{Name: x.Name, Created: x.Created.UTC(), IP: x.IP, UserAgent: x.UserAgent}
		if !x.LastPull.IsZero() {
			t := x.LastPull.UTC()
			bi.LastPull = &t
		}
		out.Bouncers = append(out.Bouncers, bi)
	}
	return out, nil
}

// AddBouncer registers a bouncer named name in db and returns its new key,
// of which db keeps only the hash.
func AddBouncer(db any, name string, now time.Time) (*BouncerAdded, error) {
	b, err := bouncersOf(db)
	if err != nil {
		return nil, err
	}
	if !bouncerName.MatchString(name) {
		return nil, errf(ErrBadRequest, "bouncer name %q: want 1-64 letters, digits, '.', '_', '@' or '-', from a letter or digit", name)
	}
	bs, err := b.ListBouncers()
	if err != nil {
		return nil, err
	}
	for _, x := range bs {
		if x.Name == name {
			return nil, errf(ErrBadRequest, "bouncer %q exists: delete it first to give it a new key", name)
		}
	}
	key, hash, err := crowdsec.NewKey()
	if err != nil {
		return nil, err
	}
	if err := b.AddBouncer(state.Bouncer{Name: name, KeyHash: hash, Created: now}); err != nil {
		return nil, err
	}
	return &BouncerAdded{Name: name, Key: key}, nil
}

// DeleteBouncer removes the bouncer name from db: its key stops working
// within a second. ErrNotFound when there is none.
func DeleteBouncer(db any, name string) error {
	b, err := bouncersOf(db)
	if err != nil {
		return err
	}
	ok, err := b.DeleteBouncer(name)
	if err != nil {
		return err
	}
	if !ok {
		return errf(ErrNotFound, "no bouncer %q", name)
	}
	return nil
}

func (s *Server) listBouncers(w http.ResponseWriter, r *http.Request) {
	l, err := ListBouncers(s.o.DB)
	reply(w, l, err)
}

func (s *Server) addBouncer(w http.ResponseWriter, r *http.Request) {
	who, ok := s.changer(w, r, "bouncers add")
	if !ok {
		return
	}
	var req BouncerRequest
	if err := decode(r, &req); err != nil {
		reply(w, nil, err)
		return
	}
	res, err := AddBouncer(s.o.DB, req.Name, s.o.Now())
	if err == nil {
		s.o.Logger.Info("bouncer added", "name", req.Name, "by", who)
	}
	reply(w, res, err)
}

func (s *Server) deleteBouncer(w http.ResponseWriter, r *http.Request) {
	who, ok := s.changer(w, r, "bouncers delete")
	if !ok {
		return
	}
	var req BouncerRequest
	if err := decode(r, &req); err != nil {
		reply(w, nil, err)
		return
	}
	err := DeleteBouncer(s.o.DB, req.Name)
	if err == nil {
		s.o.Logger.Info("bouncer deleted", "name", req.Name, "by", who)
		if s.o.BouncerDeleted != nil {
			s.o.BouncerDeleted()
		}
	}
	reply(w, req, err)
}

// Bouncers asks the daemon for the bouncers.
func (c *Client) Bouncers(ctx context.Context) (*BouncerList, error) {
	var l BouncerList
	return &l, c.do(ctx, http.MethodGet, "/v1/bouncers", nil, nil, &l)
}

// AddBouncer asks the daemon to add a bouncer.
func (c *Client) AddBouncer(ctx context.Context, name string) (*BouncerAdded, error) {
	var res BouncerAdded
	return &res, c.do(ctx, http.MethodPost, "/v1/bouncers/add", nil, BouncerRequest{Name: name}, &res)
}

// DeleteBouncer asks the daemon to delete a bouncer.
func (c *Client) DeleteBouncer(ctx context.Context, name string) error {
	var res BouncerRequest
	return c.do(ctx, http.MethodPost, "/v1/bouncers/delete", nil, BouncerRequest{Name: name}, &res)
}
