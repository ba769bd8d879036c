package rules

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gaissmai/bart"
	"gopkg.in/yaml.v3"

	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/signatures"
)

// Defaults of the configuration (DESIGN.md, "The configuration contract").
const (
	DefaultStateDir         = "/var/lib/logjail"
	DefaultIPv4Prefix       = 24
	DefaultIPv6Prefix       = 64
	DefaultSkew             = 5 * time.Second
	DefaultFuture           = time.Minute
	DefaultMaxKeys          = 1000000
	DefaultMaxBansPerMinute = 100
	DefaultHistoryRetention = 90 * 24 * time.Hour
	DefaultCheckpoint       = 5 * time.Second
	DefaultCleaner          = "@every 1m"
	DefaultMetrics          = "127.0.0.1:9390"
	DefaultControlSocket    = "/run/logjail/control.sock"

	DefaultInitialDelay = 10 * time.Second    // throttle.initial_delay
	DefaultMaxDelay     = 60 * time.Second    // throttle.max_delay (or initial_delay when longer)
	DefaultQuiet        = 3 * time.Second     // throttle.quiet
	DefaultBanFor       = 10 * time.Minute    // ban.for
	DefaultBanMax       = 24 * time.Hour      // ban.max (or ban.for when longer)
	DefaultRemember     = 30 * 24 * time.Hour // ban.remember
)

// ActionTypes are the action types the configuration accepts.
var actionTypes = []string{"blockfile", "nginx", "apache", "haproxy", "list", "iptables", "nftables", "endpoint", "exec", "crowdsec"}

// ActionTypes returns the action types a configuration may name.
func ActionTypes() []string { return slices.Clone(actionTypes) }

// Config is a loaded, validated and compiled configuration. It is immutable
// once returned, and safe for concurrent use.
type Config struct {
	File             string        // the file it was read from
	StateDir         string        // directory of the database
	IPv4Prefix       int           // bits of an IPv4 prefix key
	IPv6Prefix       int           // bits of an IPv6 ip or prefix key
	Skew             time.Duration // how late a line from another file may arrive
	Future           time.Duration // how far ahead a line may be (pipeline's doc, "One line cannot move the clock")
	MaxKeys          int           // tracked keys before least-recently-seen eviction
	MaxBansPerMinute int           // circuit breaker
	HistoryRetention time.Duration // how long ban history is kept
	Checkpoint       time.Duration // how often the daemon writes its state into the database
	Cores            int           // the machine's cores, for "of machine" limits
	Sources          []*Source
	// Rules holds the ordinary rules in file order, then one rule per range
	// with limits, named "range:NAME", in file order. Rule.Index is the
	// position here.
	Rules         []*Rule
	Actions       []Action
	Cleaner       string // cron expression or "@every D"
	Metrics       string // listen address of /metrics; "" for none
	ControlSocket string // the CLI talks to the daemon here
	// GoodBotsVerify is good_bots.verify: VerifyRanges (the default),
	// VerifyDNS or VerifyOff.
	GoodBotsVerify string
	// Fleet is the fleet: section, nil without one (a node alone).
	Fleet *Fleet

	allow      *bart.Lite       // allow list, host addresses, trusted proxies
	allowList  []netip.Prefix   // the same, as listed (duplicates removed)
	deny       *bart.Lite       // deny list
	ranges     *bart.Table[int] // CIDR -> index into rangeDefs
	listed     firstBytes       // the first bytes of allow's, deny's and ranges' prefixes (lists)
	rangeDefs  []rangeDef
	staticBans []StaticBan
	hostAddrs  []netip.Addr
	listFiles  []string
	ruleSpecs  []ruleSpec     // by rule index
	bySource   [][]int        // by source index: ordinary rules that see it
	noSource   []int          // ordinary rules that see every source
	plainOf    []uint64       // by source index, then noSource's: the rules without `match` (the first 64), for ClaimTo
	matchOf    [][]int        // the same: the rules with one
	ruleIndex  map[string]int // rule name -> index
	warnings   []*Error       // what is valid but likely a mistake (Warnings)

	bots      *goodbots.Verifier        // nil: good_bots off
	botsRule  int                       // index of the good_bots rule in Rules
	botKeys   map[string]string         // crawler name -> range:NAME
	botRanges map[string][]netip.Prefix // range:NAME -> the crawler's published ranges
}

// Source is one log source: the files of one format.
type Source struct {
	Name        string
	Index       int            // position in Config.Sources
	Paths       []string       // globs, relative ones joined to the configuration's directory; rotated siblings (.1, .2.gz, -20261122) belong to the source
	Parser      parser.Options // format, cpu_field, timezone and trusted_proxies
	CPUFallback string         // "none" or "duration": what `% cpu` limits weigh where a line has no CPU
	From        string         // "end" or "start": where a file never seen before is first read
	// OldDir is where logrotate's `olddir` puts the rotated files, as
	// written (a relative one is relative to each log's directory, as
	// logrotate reads it; package rotation resolves it); "" for none.
	OldDir string
	// Type is SourceFile (paths), SourceJournald or SourceSyslog; Stream
	// holds the last two's keys (rules/stream.go).
	Type   string
	Stream Stream

	hasCPU bool // the format can carry CPU
	// known: the format is fixed (not `auto`), and fields and hasXFF say
	// what its lines can carry (parser.Parser.Carries).
	known  bool
	fields []string
	hasXFF bool
}

// Action is one configured action. Its type is checked here; its options
// are checked by the ActionChecker given to Load (Options.Actions), in the
// same pass, and each problem names the line of the option's value.
type Action struct {
	Type  string
	Index int // position in the configuration's actions list (in Config.Actions once loaded)
	Line  int // line of the action in the configuration
	// Lines holds the line of each key's value (type included): where a
	// problem with that option is reported.
	Lines   map[string]int
	Options map[string]any // every key but type, as decoded from YAML
}

// ActionChecker checks the options of a configuration's actions while Load
// decodes the file: the actions registry (actions.Builtin) implements it;
// rules cannot import actions, so it says here what it asks of it.
type ActionChecker interface {
	// CheckActions returns every problem of the options of actions (those
	// of file whose type is known, in file order), each an *Error naming
	// file, the line of the option's value (Action.Lines) and the path
	// actions[INDEX].OPTION, joined; nil when there is none. It touches
	// nothing outside the process.
	CheckActions(file string, actions []Action) error
}

// Options are what Load and Parse need to know of the machine. The zero value
// discovers them.
type Options struct {
	// HostAddrs are the host's own addresses, always allowed. nil: the
	// addresses of the host's interfaces (net.InterfaceAddrs); an empty
	// non-nil slice: none.
	HostAddrs []netip.Addr
	// Cores multiplies "of machine" limits (a share of all the cores, in
	// CPU seconds per second). 0: runtime.NumCPU().
	Cores int
	// Verifier verifies crawlers under good_bots: {verify: dns}: one with a
	// Resolver, living as long as the daemon (every reload gets the same
	// one). nil, or under verify: ranges: the published ranges only.
	Verifier *goodbots.Verifier
	// Actions checks each action's options in the same pass as the rest of
	// the file, so that one error lists every problem, sorted by line:
	// logjail's commands and daemon pass actions.Builtin(...). nil: only
	// each action's type is checked (the options are left to whoever builds
	// the actions).
	Actions ActionChecker
}

type rangeMode int

const (
	rangeLimits rangeMode = iota
	rangeNone
	rangeBanned
)

type rangeDef struct {
	name  string
	mode  rangeMode
	group bool
	key   string // "range:NAME"
	rule  int    // index in Rules when mode == rangeLimits
}

type ruleSpec struct {
	match *matcher        // nil: every entry
	sigs  *signatures.Set // nil: every entry
}

// signature reports whether e passes the spec's `signatures:` (true when
// it has none) and the ID of the first pattern it matched ("" for none).
func (sp *ruleSpec) signature(e *parser.Entry) (string, bool) {
	if sp.sigs == nil {
		return "", true
	}
	if p := sp.sigs.First(e); p != nil {
		return p.ID, true
	}
	return "", false
}

// Load reads, validates and compiles the configuration file at path and the
// `file:` lists it names (relative to its directory). Every problem is
// returned at once: an errors.Join of *Error.
func Load(path string, o Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, o)
}

// Parse is Load on data already read from filename; `file:` lists are read
// relative to filename's directory.
func Parse(filename string, data []byte, o Options) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, errors.Join(syntaxError(filename, err))
	}
	var root *yaml.Node
	if len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if o.Cores <= 0 {
		o.Cores = runtime.NumCPU()
	}
	if o.HostAddrs == nil {
		addrs, err := hostAddrs()
		if err != nil {
			return nil, fmt.Errorf("%s: host addresses: %w", filename, err)
		}
		o.HostAddrs = addrs
	}
	b := &builder{
		decoder: decoder{file: filename},
		dir:     filepath.Dir(filename),
		c: &Config{
			File:             filename,
			StateDir:         DefaultStateDir,
			IPv4Prefix:       DefaultIPv4Prefix,
			IPv6Prefix:       DefaultIPv6Prefix,
			Skew:             DefaultSkew,
			Future:           DefaultFuture,
			MaxKeys:          DefaultMaxKeys,
			MaxBansPerMinute: DefaultMaxBansPerMinute,
			HistoryRetention: DefaultHistoryRetention,
			Checkpoint:       DefaultCheckpoint,
			Cores:            o.Cores,
			Cleaner:          DefaultCleaner,
			Metrics:          DefaultMetrics,
			ControlSocket:    DefaultControlSocket,
			allow:            new(bart.Lite),
			deny:             new(bart.Lite),
			ranges:           new(bart.Table[int]),
			ruleIndex:        map[string]int{},
		},
	}
	b.build(root, o)
	if err := b.err(); err != nil {
		return nil, err
	}
	return b.c, nil
}

// Example returns the commented example configuration, which documents every
// key and its default. It is valid: Parse accepts it.
func Example() []byte { return slices.Clone(example) }

// hostAddrs returns the addresses of the host's interfaces.
func hostAddrs() ([]netip.Addr, error) {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := []netip.Addr{}
	for _, ifa := range ifas {
		var ip net.IP
		switch v := ifa.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap().WithZone(""))
		}
	}
	return out, nil
}

// builder compiles a configuration while collecting its problems.
type builder struct {
	decoder
	dir string
	c   *Config
	// limit nodes of each rule, for the CPU check after every rule is read
	limitNodes map[int][]nodeRef
	// sources each ordinary rule sees; absent: every source
	ruleSources map[int][]int
	// match fields of each rule (not those under `not:`), for the check
	// that some source of the rule carries them
	matchNodes map[int][]nodeRef
}

// nodeRef is a node and its path, kept for a check made later.
type nodeRef struct {
	node *yaml.Node
	path string
}

var topKeys = []string{
	"state_dir", "ipv4_prefix", "ipv6_prefix", "skew", "future", "max_keys", "max_bans_per_minute",
	"history_retention", "checkpoint", "sources", "allow", "deny", "ranges", "rules", "actions",
	"cleaner", "metrics", "control_socket", "silence", "good_bots", "fleet",
}

func (b *builder) build(root *yaml.Node, o Options) {
	c := b.c
	b.limitNodes = map[int][]nodeRef{}
	b.ruleSources = map[int][]int{}
	b.matchNodes = map[int][]nodeRef{}
	fields := map[string]field{}
	for _, f := range b.mapping(root, "", topKeys...) {
		fields[f.key.Value] = f
	}
	if f, ok := fields["state_dir"]; ok && b.str(f.val, f.path, &c.StateDir) && c.StateDir == "" {
		b.errorf(f.val, f.path, "must not be empty")
	}
	if f, ok := fields["ipv4_prefix"]; ok {
		b.integer(f.val, f.path, 1, 32, &c.IPv4Prefix)
	}
	if f, ok := fields["ipv6_prefix"]; ok {
		b.integer(f.val, f.path, 1, 128, &c.IPv6Prefix)
	}
	if f, ok := fields["skew"]; ok {
		b.duration(f.val, f.path, 0, &c.Skew)
	}
	if f, ok := fields["future"]; ok {
		b.duration(f.val, f.path, time.Second, &c.Future)
	}
	if f, ok := fields["max_keys"]; ok {
		b.integer(f.val, f.path, 1, math.MaxInt, &c.MaxKeys)
	}
	if f, ok := fields["max_bans_per_minute"]; ok {
		b.integer(f.val, f.path, 1, math.MaxInt, &c.MaxBansPerMinute)
	}
	if f, ok := fields["history_retention"]; ok {
		b.duration(f.val, f.path, time.Hour, &c.HistoryRetention)
	}
	if f, ok := fields["checkpoint"]; ok {
		b.duration(f.val, f.path, time.Second, &c.Checkpoint)
		if c.Checkpoint > 10*time.Minute {
			b.errorf(f.val, f.path, "%v: at most 10m (a crash re-reads the logs since the last checkpoint)", c.Checkpoint)
		}
	}
	if f, ok := fields["cleaner"]; ok && b.str(f.val, f.path, &c.Cleaner) {
		if err := checkSchedule(c.Cleaner); err != nil {
			b.errorf(f.val, f.path, "%q: %v", c.Cleaner, err)
		}
	}
	if f, ok := fields["metrics"]; ok && b.str(f.val, f.path, &c.Metrics) && c.Metrics != "" {
		if err := checkListen(c.Metrics); err != nil {
			b.errorf(f.val, f.path, "%q: %v", c.Metrics, err)
		}
	}
	if f, ok := fields["control_socket"]; ok && b.str(f.val, f.path, &c.ControlSocket) && c.ControlSocket == "" {
		b.errorf(f.val, f.path, "must not be empty")
	}

	if f, ok := fields["sources"]; ok {
		b.sources(f)
	}
	if len(c.Sources) == 0 && !b.hasErrorAt("sources") {
		n := root
		if f, ok := fields["sources"]; ok {
			n = f.val
		}
		b.errorf(n, "sources", "at least one source is required")
	}

	c.hostAddrs = slices.Clone(o.HostAddrs)
	for _, a := range c.hostAddrs {
		a = a.Unmap().WithZone("")
		c.addAllow(netip.PrefixFrom(a, a.BitLen()))
	}
	for _, s := range c.Sources {
		for _, p := range s.Parser.TrustedProxies {
			c.addAllow(p)
		}
	}
	if f, ok := fields["allow"]; ok {
		for _, p := range b.prefixList(f.val, f.path) {
			if b.wholeFamily(p, "an allow list of it exempts every client from every rule") {
				continue
			}
			c.addAllow(p.Prefix)
		}
	}
	if f, ok := fields["deny"]; ok {
		for _, p := range b.prefixList(f.val, f.path) {
			if b.wholeFamily(p, "a deny list of it bans every client") {
				continue
			}
			if c.deny.Get(p.Prefix) {
				continue // listed twice
			}
			c.deny.Insert(p.Prefix)
			c.listed.add(p.Prefix)
			c.staticBans = append(c.staticBans, StaticBan{Key: p.Prefix, Origin: "deny", Reason: "deny list"})
		}
	}
	if f, ok := fields["fleet"]; ok {
		b.fleet(f)
	}
	if f, ok := fields["rules"]; ok {
		b.rules(f)
	}
	if f, ok := fields["ranges"]; ok {
		b.rangeList(f)
	}
	b.goodBots(fields, o)
	b.checkCPU()
	b.checkMatch()
	b.index()
	// Allow wins over deny and over banned ranges (DESIGN.md: nothing
	// but an operator's ban --force overrides allow): a static ban whose
	// whole prefix is allowed is dropped. A static ban that only partly
	// overlaps the allow list stays; the actions exempt allowed addresses.
	c.staticBans = slices.DeleteFunc(c.staticBans, func(s StaticBan) bool {
		return c.allow.LookupPrefix(s.Key)
	})
	if f, ok := fields["actions"]; ok {
		b.actions(f, o.Actions)
	}
	b.warn(fields)
}

// hasErrorAt reports whether a problem was already reported under path.
func (b *builder) hasErrorAt(path string) bool {
	for _, err := range b.errs {
		var e *Error
		if errors.As(err, &e) && (e.Path == path || strings.HasPrefix(e.Path, path+"[") || strings.HasPrefix(e.Path, path+".")) {
			return true
		}
	}
	return false
}

// index builds the per-source rule lists.
func (b *builder) index() {
	c := b.c
	c.bySource = make([][]int, len(c.Sources))
	for i, r := range c.Rules {
		if strings.HasPrefix(r.Name, "range:") || (c.bots != nil && i == c.botsRule) {
			continue
		}
		srcs, restricted := b.ruleSources[i]
		if !restricted {
			c.noSource = append(c.noSource, i)
			for s := range c.Sources {
				c.bySource[s] = append(c.bySource[s], i)
			}
			continue
		}
		for _, s := range srcs {
			c.bySource[s] = append(c.bySource[s], i)
		}
	}
	c.plainOf, c.matchOf = make([]uint64, len(c.Sources)+1), make([][]int, len(c.Sources)+1)
	for s := range len(c.Sources) + 1 {
		rs := c.noSource
		if s < len(c.Sources) {
			rs = c.bySource[s]
		}
		for _, i := range rs {
			if i < len(c.ruleSpecs) && c.ruleSpecs[i].match != nil {
				c.matchOf[s] = append(c.matchOf[s], i)
			} else if i < 64 {
				c.plainOf[s] |= 1 << i
			}
		}
	}
}

var sourceKeys = []string{
	"name", "paths", "format", "log_format", "apache_format", "fpm_format", "json_fields",
	"cpu_field", "cpu_fallback", "timezone", "trusted_proxies", "from", "olddir",
	"type", "match", "journal_directory", "journal_files", "listen", "peers", "tag", "socket_group",
}

func (b *builder) sources(top field) {
	c := b.c
	names := map[string]int{}
	for i, n := range b.sequence(top.val, top.path) {
		path := index(top.path, i)
		s := &Source{Index: len(c.Sources), CPUFallback: "none", From: "end", Type: SourceFile}
		s.Parser.Location = time.Local
		var formats []field
		var nameNode, tpNode *yaml.Node
		var tpPath string
		keys := map[string]field{}
		for _, f := range b.mapping(n, path, sourceKeys...) {
			keys[f.key.Value] = f
			switch f.key.Value {
			case "type":
				b.oneOf(f.val, f.path, &s.Type, SourceFile, SourceJournald, SourceSyslog)
			case "match", "journal_directory", "journal_files", "listen", "peers", "tag", "socket_group":
				b.streamField(s, f)
			case "name":
				nameNode = f.val
				b.name(f.val, f.path, &s.Name)
			case "paths":
				s.Paths = b.strs(f.val, f.path)
				for j, p := range s.Paths {
					if p == "" {
						b.errorf(f.val, index(f.path, j), "empty path")
					} else if _, err := filepath.Match(p, ""); err != nil {
						b.errorf(f.val, index(f.path, j), "%q: %v", p, err)
					} else if !filepath.IsAbs(p) {
						s.Paths[j] = filepath.Join(b.dir, p) // relative to the configuration
					}
				}
			case "format":
				formats = append(formats, f)
				b.str(f.val, f.path, &s.Parser.Format)
			case "log_format":
				formats = append(formats, f)
				b.str(f.val, f.path, &s.Parser.LogFormat)
			case "apache_format":
				formats = append(formats, f)
				b.str(f.val, f.path, &s.Parser.ApacheFormat)
			case "fpm_format":
				formats = append(formats, f)
				b.str(f.val, f.path, &s.Parser.FPMFormat)
			case "json_fields":
				formats = append(formats, f)
				s.Parser.JSONFields = map[string]string{}
				for _, jf := range b.mapping(f.val, f.path) {
					var v string
					if b.str(jf.val, jf.path, &v) {
						if v == "" {
							b.errorf(jf.val, jf.path, "empty JSON path")
						}
						s.Parser.JSONFields[jf.key.Value] = v
					}
				}
				if len(s.Parser.JSONFields) == 0 && !isNull(f.val) && resolve(f.val).Kind == yaml.MappingNode {
					b.errorf(f.val, f.path, "map at least ip and time to JSON fields")
				}
			case "cpu_field":
				b.str(f.val, f.path, &s.Parser.CPUField)
			case "cpu_fallback":
				b.oneOf(f.val, f.path, &s.CPUFallback, "none", "duration")
			case "timezone":
				var tz string
				if b.str(f.val, f.path, &tz) {
					loc, err := time.LoadLocation(tz)
					if err != nil || tz == "" {
						b.errorf(f.val, f.path, "%q: unknown time zone", tz)
					} else {
						s.Parser.Location = loc
					}
				}
			case "trusted_proxies":
				tpNode, tpPath = f.key, f.path
				for _, p := range b.prefixList(f.val, f.path) {
					if b.wholeFamily(p, "trusted proxies are allowed: that exempts every client from every rule") {
						continue
					}
					s.Parser.TrustedProxies = append(s.Parser.TrustedProxies, p.Prefix)
				}
			case "from":
				b.oneOf(f.val, f.path, &s.From, "end", "start")
			case "olddir":
				if b.str(f.val, f.path, &s.OldDir) {
					if s.OldDir == "" {
						b.errorf(f.val, f.path, "empty directory")
					} else if strings.ContainsAny(s.OldDir, `*?[\`) {
						b.errorf(f.val, f.path, "%q: a directory, not a glob", s.OldDir)
					} else {
						s.OldDir = filepath.Clean(s.OldDir)
					}
				}
			}
		}
		if nameNode == nil && resolve(n) != nil && resolve(n).Kind == yaml.MappingNode {
			b.errorf(n, path, "name is required")
		}
		if s.Name != "" {
			if first, dup := names[s.Name]; dup {
				b.errorf(nameNode, path+".name", "duplicate source name %q (first at line %d)", s.Name, first)
			} else {
				names[s.Name] = nameNode.Line
			}
		}
		if len(s.Paths) == 0 && s.Type == SourceFile && resolve(n) != nil && resolve(n).Kind == yaml.MappingNode {
			b.errorf(n, path+".paths", "at least one path is required")
		}
		b.checkStream(s, n, path, keys)
		switch len(formats) {
		case 0:
			s.Parser.Format = "combined"
		case 1:
		default:
			b.errorf(formats[1].key, formats[1].path, "only one of format, log_format, apache_format, fpm_format and json_fields")
		}
		if len(formats) <= 1 {
			fpath, fnode := path+".format", n
			if len(formats) == 1 {
				fpath, fnode = formats[0].path, formats[0].val
			}
			if err := checkFormat(s.Parser); err != nil {
				b.errorf(fnode, fpath, "%v", err)
			} else if s.Parser.Format != "auto" {
				b.carries(s)
			}
		}
		if tpNode != nil && s.known && !s.hasXFF && len(s.Parser.TrustedProxies) > 0 {
			b.errorf(tpNode, tpPath, "the format has no X-Forwarded-For field, so every line a proxy logs is the proxy's own address and allowed: add the field to the format (nginx $http_x_forwarded_for, Apache %%{X-Forwarded-For}i, JSON x_forwarded_for), or remove trusted_proxies")
		}
		s.hasCPU = carriesCPU(s.Parser)
		c.Sources = append(c.Sources, s)
	}
}

// carriesCPU reports whether a source's format can carry CPU seconds.
func carriesCPU(o parser.Options) bool {
	switch {
	case o.CPUField != "":
		return true
	case o.Format == "phpfpm":
		return true
	case strings.Contains(o.FPMFormat, "%C"):
		return true
	}
	if _, ok := o.JSONFields["cpu"]; ok {
		return true
	}
	return false
}

// listed is one prefix of an allow, deny, cidrs or trusted_proxies list.
type listed struct {
	netip.Prefix
	file string
	line int
	path string // of the item in the configuration
}

// prefixList reads a list of addresses, CIDRs and `file:PATH` items.
func (b *builder) prefixList(n *yaml.Node, path string) []listed {
	var out []listed
	var items []*yaml.Node
	if r := resolve(n); r != nil && r.Kind == yaml.ScalarNode && !isNull(r) {
		items = []*yaml.Node{r} // a single item
	} else {
		items = b.sequence(n, path)
	}
	for i, it := range items {
		p := index(path, i)
		var s string
		if !b.str(it, p, &s) {
			continue
		}
		if name, ok := strings.CutPrefix(s, "file:"); ok {
			out = append(out, b.listFile(it, p, s, name)...)
			continue
		}
		pfx, err := parsePrefix(s)
		if err != nil {
			b.errorf(it, p, "%v", err)
			continue
		}
		out = append(out, listed{Prefix: pfx, file: b.file, line: resolve(it).Line, path: p})
	}
	return out
}

// readFile reads the file a `file:PATH` item (item) names (name, relative
// to the config's directory), and notes it among the files whose change
// reloads the daemon. It returns the file's path and contents, or "" after
// reporting the error at n.
func (b *builder) readFile(n *yaml.Node, path, item, name string) (string, []byte) {
	name = strings.TrimSpace(name)
	if name == "" {
		b.errorf(n, path, "%q: no file name", item)
		return "", nil
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(b.dir, name)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		b.errorf(n, path, "%q: %s: %v", item, name, err)
		return "", nil
	}
	if !slices.Contains(b.c.listFiles, name) {
		b.c.listFiles = append(b.c.listFiles, name)
	}
	return name, data
}

// listFile reads a `file:` list: one address or CIDR a line, '#' comments.
func (b *builder) listFile(n *yaml.Node, path, item, name string) []listed {
	name, data := b.readFile(n, path, item, name)
	if name == "" {
		return nil
	}
	var out []listed
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		pfx, err := parsePrefix(text)
		if err != nil {
			b.errs = append(b.errs, &Error{File: name, Line: line, Path: path, Msg: err.Error()})
			continue
		}
		out = append(out, listed{Prefix: pfx, file: name, line: line, path: path})
	}
	if err := sc.Err(); err != nil {
		b.errorf(n, path, "%q: %v", item, err)
	}
	return out
}

// parsePrefix parses an address (a single-address prefix) or a CIDR, masked.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q: not a CIDR", s)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q: not an IP address or CIDR", s)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: an address with a zone", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

var actionKeys = []string{"type"}

// actions decodes the actions list and has check, when given, check the
// options of those whose type is known.
func (b *builder) actions(top field, check ActionChecker) {
	for i, n := range b.sequence(top.val, top.path) {
		path := index(top.path, i)
		a := Action{Index: i, Line: resolve(n).Line, Lines: map[string]int{}, Options: map[string]any{}}
		for _, f := range b.mapping(n, path) {
			a.Lines[f.key.Value] = f.val.Line
			if f.key.Value == "type" {
				b.oneOf(f.val, f.path, &a.Type, actionTypes...)
				continue
			}
			var v any
			if err := f.val.Decode(&v); err != nil {
				b.errorf(f.val, f.path, "%v", err)
				continue
			}
			a.Options[f.key.Value] = v
		}
		if a.Type == "" {
			if r := resolve(n); r != nil && r.Kind == yaml.MappingNode && !b.hasErrorAt(path+".type") {
				b.errorf(n, path+".type", "type is required: %s", orList(actionTypes))
			}
			continue
		}
		b.c.Actions = append(b.c.Actions, a)
	}
	if check != nil && len(b.c.Actions) > 0 {
		b.add(check.CheckActions(b.file, b.c.Actions), "actions")
	}
}

// checkListen checks a host:port listen address.
func checkListen(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return errors.New("bad port")
	}
	return nil
}

// Source returns the source named name, or nil.
func (c *Config) Source(name string) *Source {
	for _, s := range c.Sources {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Rule returns the rule named name ("range:NAME" for a range's), or nil.
func (c *Config) Rule(name string) *Rule {
	if i, ok := c.ruleIndex[name]; ok {
		return c.Rules[i]
	}
	return nil
}

// Allowed reports whether a is never throttled or banned by a rule: it is on
// the allow list, one of the host's own addresses, or a trusted proxy of a
// source.
func (c *Config) Allowed(a netip.Addr) bool {
	return c.allow.Contains(a.Unmap())
}

// AllowList returns every prefix Allowed is true for: the allow list, the
// host's own addresses and the sources' trusted proxies, each once, masked.
// The actions exempt them from the prefixes they block.
func (c *Config) AllowList() []netip.Prefix { return slices.Clone(c.allowList) }

func (c *Config) addAllow(p netip.Prefix) {
	p = p.Masked()
	if !c.allow.Get(p) {
		c.allowList = append(c.allowList, p)
	}
	c.allow.Insert(p)
	c.listed.add(p)
}

// StaticBans returns the bans the configuration itself makes: the deny list,
// then the CIDRs of `banned` ranges. They last until removed from the file.
func (c *Config) StaticBans() []StaticBan { return slices.Clone(c.staticBans) }

// HostAddrs returns the host addresses the configuration allows.
func (c *Config) HostAddrs() []netip.Addr { return slices.Clone(c.hostAddrs) }

// ListFiles returns the `file:` lists the configuration read, so that a
// daemon can reload when one changes.
func (c *Config) ListFiles() []string { return slices.Clone(c.listFiles) }

// WithLimitN returns a shallow copy of c in which limit number limit
// (0-based) of the named rule has its first number replaced by n: the count
// of a rate or of last N (rounded), the percentage of a share, the token rate
// of a bucket (per its unit as written). The copy shares everything else with
// c. It is for replay's --sweep.
func (c *Config) WithLimitN(rule string, limit int, n float64) (*Config, error) {
	i, ok := c.ruleIndex[rule]
	if !ok {
		return nil, fmt.Errorf("no rule %q", rule)
	}
	r := c.Rules[i]
	if limit < 0 || limit >= len(r.Limits) {
		return nil, fmt.Errorf("rule %q has no limit %d (it has %d)", rule, limit, len(r.Limits))
	}
	if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
		return nil, fmt.Errorf("rule %q limit %d: bad number %v", rule, limit, n)
	}
	l, err := withFirstNumber(r.Limits[limit], n, c.Cores)
	if err != nil {
		return nil, fmt.Errorf("rule %q limit %d: %w", rule, limit, err)
	}
	nr := *r
	nr.Limits = slices.Clone(r.Limits)
	nr.Limits[limit] = l
	cc := *c
	cc.Rules = slices.Clone(c.Rules)
	cc.Rules[i] = &nr
	return &cc, nil
}

// carries records what s's format can carry; its format compiles.
func (b *builder) carries(s *Source) {
	p, err := parser.New(s.Parser)
	if err != nil {
		return
	}
	s.fields, s.hasXFF = p.Carries()
	s.known = true
}

// wholeFamily reports, as an error, a prefix of length 0 (0.0.0.0/0 or
// ::/0): every address of a family. why says what listing it would do.
func (b *builder) wholeFamily(p listed, why string) bool {
	if p.Bits() != 0 {
		return false
	}
	fam := "IPv4"
	if p.Addr().Is6() {
		fam = "IPv6"
	}
	b.errs = append(b.errs, &Error{File: p.file, Line: p.line, Path: p.path,
		Msg: fmt.Sprintf("%s: every %s address: %s", p.Prefix, fam, why)})
	return true
}

// Warnings that `silence:` names (Config.Warnings).
const (
	WarnMetricsRemote  = "metrics_remote"  // metrics on a non-loopback address
	WarnEndpointPublic = "endpoint_public" // an endpoint with allow_remote on a public or every address
)

// Warnings returns what the configuration allows but is likely a mistake,
// each as an *Error naming its line and path: /metrics on a non-loopback
// address, a decision endpoint (allow_remote: true) on a public or
// unspecified address. `silence: [metrics_remote, endpoint_public]` says it
// is intended. `logjail check` prints them and `logjail run` logs them.
func (c *Config) Warnings() []*Error { return slices.Clone(c.warnings) }

// warn collects the warnings that `silence:` does not silence.
func (b *builder) warn(fields map[string]field) {
	silenced := map[string]bool{}
	if f, ok := fields["silence"]; ok {
		for i, name := range b.strs(f.val, f.path) {
			switch name {
			case WarnMetricsRemote, WarnEndpointPublic:
				silenced[name] = true
			default:
				b.errorf(f.val, index(f.path, i), "unknown warning %q: %s", name, orList([]string{WarnMetricsRemote, WarnEndpointPublic}))
			}
		}
	}
	c := b.c
	add := func(n *yaml.Node, line int, path, format string, args ...any) {
		if n != nil {
			line = n.Line
		}
		c.warnings = append(c.warnings, &Error{File: b.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if f, ok := fields["metrics"]; ok && !silenced[WarnMetricsRemote] && c.Metrics != "" && !loopbackListen(c.Metrics) {
		add(f.val, 0, f.path, "%q is not a loopback address: /metrics tells whoever reaches it the keys, rules and bans; listen on 127.0.0.1, or add %s to silence: if it is intended", c.Metrics, WarnMetricsRemote)
	}
	if silenced[WarnEndpointPublic] {
		return
	}
	for _, a := range c.Actions {
		if a.Type != "endpoint" {
			continue
		}
		listen, _ := a.Options["listen"].(string)
		remote, _ := a.Options["allow_remote"].(bool)
		if remote && publicListen(listen) {
			line, ok := a.Lines["listen"]
			if !ok {
				line = a.Line
			}
			add(nil, line, index("actions", a.Index)+".listen", "%q is a public address: the decision endpoint tells anyone on the Internet who is banned; listen on a private or loopback address, or add %s to silence: if it is intended", listen, WarnEndpointPublic)
		}
	}
}

// loopbackListen reports whether a HOST:PORT listens on loopback only.
func loopbackListen(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return true // checkListen reported it
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// publicListen reports whether a HOST:PORT listens on every address or on
// a public one (not loopback, private or link-local). A host name is not
// resolved: it is taken as public.
func publicListen(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil || host == "localhost" {
		return false
	}
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return true
	}
	a = a.Unmap()
	return !(a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast())
}
