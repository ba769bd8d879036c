package rules

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/logjail/logjail/limits"
)

// A rule's scopes (`scope:`).
const (
	ScopeFleet = "fleet" // its windows are the fleet's sums
	ScopeNode  = "node"  // its windows are this node's alone
)

// Defaults and bounds of the fleet: section.
const (
	DefaultFleetSync = 200 * time.Millisecond
	minFleetSync     = 10 * time.Millisecond
	maxFleetSync     = 10 * time.Second
	maxNodeName      = 64
)

var fleetKeys = []string{"redis", "cluster", "addrs", "password_file", "ca_file", "node", "sync"}

var nodeRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// fleet reads the fleet: section into c.Fleet (set even when it has
// problems, so that the rules' scope is judged against it).
func (b *builder) fleet(top field) {
	fl := &Fleet{Sync: DefaultFleetSync, Line: top.key.Line}
	b.c.Fleet = fl
	var redisNode, pwNode *yaml.Node
	var hasURLPassword bool
	var redisURL *url.URL
	var redisField, addrsField field
	var addrs []string
	for _, f := range b.mapping(top.val, top.path, fleetKeys...) {
		switch f.key.Value {
		case "cluster":
			b.boolean(f.val, f.path, &fl.Cluster)
		case "addrs":
			addrsField = f
			for i, it := range b.sequence(f.val, f.path) {
				var a string
				if !b.str(it, index(f.path, i), &a) {
					continue
				}
				if err := checkSeed(a); err != nil {
					b.errorf(it, index(f.path, i), "%q: %v", a, err)
					continue
				}
				addrs = append(addrs, a)
			}
		case "redis":
			redisNode, redisField = f.key, f
			if !b.str(f.val, f.path, &fl.Redis) {
				continue
			}
			u, err := url.Parse(fl.Redis)
			switch {
			case err != nil:
				var ue *url.Error
				if errors.As(err, &ue) {
					err = ue.Err
				}
				b.errorf(f.val, f.path, "%q: %v", fl.Redis, err)
			case u.Scheme != "redis" && u.Scheme != "rediss":
				b.errorf(f.val, f.path, "%q: want a redis:// or rediss:// (TLS) URL", fl.Redis)
			case u.Hostname() == "":
				b.errorf(f.val, f.path, "%q: no host: want e.g. redis://127.0.0.1:6379/0", fl.Redis)
			default:
				_, hasURLPassword = u.User.Password()
				redisURL = u
			}
		case "password_file":
			pwNode = f.key
			b.fleetFile(f, &fl.PasswordFile)
		case "ca_file":
			b.fleetFile(f, &fl.CAFile)
		case "node":
			if b.str(f.val, f.path, &fl.Node) {
				if err := checkNode(fl.Node); err != nil {
					b.errorf(f.val, f.path, "%q: %v", fl.Node, err)
				}
			}
		case "sync":
			if b.duration(f.val, f.path, minFleetSync, &fl.Sync) && fl.Sync > maxFleetSync {
				b.errorf(f.val, f.path, "%v: at most %v", fl.Sync, maxFleetSync)
			}
		}
	}
	if redisNode == nil && !b.hasErrorAt(top.path) {
		b.errorf(top.key, top.path+".redis", "redis is required: e.g. redis://127.0.0.1:6379/0")
	}
	b.fleetCluster(fl, redisURL, redisField, addrsField, addrs)
	if hasURLPassword && pwNode != nil {
		b.errorf(pwNode, top.path+".password_file", "the redis URL has a password already: give it once")
	}
	if fl.Node == "" {
		host, err := os.Hostname()
		if err == nil {
			err = checkNode(host)
		}
		if err != nil {
			b.errorf(top.key, top.path+".node", "the host name %q is no node name (%v): set node", host, err)
		}
		fl.Node = host
	}
}

// fleetCluster checks what names a Redis Cluster (cluster: true, the
// URL's addr= parameters, addrs:) and appends the addrs: list to
// fl.Redis as addr= parameters, the form the fleet's client reads: the
// section stays one comparable value. u is the parsed redis URL (nil when
// it has problems), rf and af its field and the addrs: field (zero when
// absent), addrs the valid seeds of that list.
func (b *builder) fleetCluster(fl *Fleet, u *url.URL, rf, af field, addrs []string) {
	if af.key != nil && !fl.Cluster {
		b.errorf(af.key, af.path, "more seeds of a Redis Cluster: set cluster: true, or drop addrs")
		return
	}
	if u == nil {
		return
	}
	q := u.Query()
	for _, a := range q["addr"] {
		if !fl.Cluster {
			b.errorf(rf.val, rf.path, "%q: addr= names more seeds of a Redis Cluster: set cluster: true", fl.Redis)
			return
		}
		if err := checkSeed(a); err != nil {
			b.errorf(rf.val, rf.path, "%q: addr=%s: %v", fl.Redis, a, err)
			return
		}
	}
	if !fl.Cluster {
		return
	}
	if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
		b.errorf(rf.val, rf.path, "%q: database %s: a Redis Cluster has database 0 only", fl.Redis, db)
		return
	}
	if len(addrs) > 0 {
		for _, a := range addrs {
			q.Add("addr", a)
		}
		u.RawQuery = q.Encode()
		fl.Redis = u.String()
	}
}

// checkSeed checks a seed of a Redis Cluster: host:port.
func checkSeed(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port: %v", err)
	}
	if host == "" {
		return errors.New("no host: want host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	return nil
}

// checkNode checks a node's name: letters, digits, '.', '_', '-', at most
// 64 bytes (it is part of Redis keys and of `logjail list`).
func checkNode(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > maxNodeName:
		return fmt.Errorf("%d bytes, at most %d", len(s), maxNodeName)
	case !nodeRE.MatchString(s):
		return errors.New("a node name is letters, digits, '.', '_' and '-'")
	}
	return nil
}

// fleetFile reads a file name of the fleet: section (relative to the
// configuration's directory) that must name a file: only its presence is
// checked here (the secret is the fleet's to read).
func (b *builder) fleetFile(f field, dst *string) {
	var name string
	if !b.str(f.val, f.path, &name) {
		return
	}
	if name == "" {
		b.errorf(f.val, f.path, "empty file name")
		return
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(b.dir, name)
	}
	st, err := os.Stat(name)
	switch {
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		b.errorf(f.val, f.path, "%s: %v", name, err)
		return
	case !st.Mode().IsRegular():
		b.errorf(f.val, f.path, "%s: not a file", name)
		return
	}
	*dst = name
}

// scope sets r.Fleet from its `scope:` (scope, "" when not written, at
// node n and path) or its default: fleet when the configuration has a
// fleet: section and every limit of the rule can be summed over the
// nodes, else node. The fleet: section is read before the rules.
func (b *builder) scope(r *Rule, scope string, n *yaml.Node, path string) {
	summable := true
	for _, l := range r.Limits {
		if l.Kind.Traits().Layout != limits.Buckets {
			summable = false
		}
	}
	switch scope {
	case "":
		r.Fleet = b.c.Fleet != nil && summable
	case ScopeNode:
		r.Fleet = false
	case ScopeFleet:
		switch {
		case b.c.Fleet == nil:
			b.errorf(n, path, "scope: fleet needs a fleet: section (the Redis the nodes share)")
		case !summable:
			b.errorf(n, path, "scope: fleet needs limits the fleet can sum: rate or share; token bucket and last N are per node")
		default:
			r.Fleet = true
		}
	}
}
