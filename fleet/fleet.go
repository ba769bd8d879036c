package fleet

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Config says how a node reaches Redis and how often it exchanges.
type Config struct {
	URL          string                           // redis://[user:password@]host:port/db or rediss:// (TLS); with Cluster, a seed, more seeds as ?addr=host:port
	Cluster      bool                             // URL is a Redis Cluster (database 0 only)
	PasswordFile string                           // optional: its first line is the password (overrides the URL's); errors name the file
	CAFile       string                           // optional: PEM CA for rediss:// (self-signed servers)
	Node         string                           // this node's name, unique in the fleet
	Sync         time.Duration                    // the exchange period (default 200ms)
	QueueMax     int                              // publications kept while Redis is away (default 10000; oldest dropped, counted)
	Logf         func(format string, args ...any) // the daemon's log (nil: silent)
}

// Delta is this node's new count in one bucket since the last exchange.
type Delta struct {
	Rule, Key string
	Limit     int           // the limit's index in its rule
	Bucket    uint64        // the window bucket (log time / bucket width)
	Units     uint64        // count, or cost units, added to the bucket on this node
	TTL       time.Duration // how long the bucket matters (window + one bucket): the Redis key's expiry
}

// Add is other nodes' units in a bucket that this node has not absorbed yet.
type Add struct {
	Rule, Key string
	Limit     int
	Bucket    uint64
	Units     uint64
}

// Decision is a ban, unban or throttle as the fleet exchanges it. Its JSON
// form is the record kept in Redis and announced on the stream.
type Decision struct {
	Kind      string        `json:"kind"` // "ban", "unban", "throttle"
	Rule      string        `json:"rule"`
	Key       string        `json:"key"`
	Node      string        `json:"node"`            // the node that decided it
	Time      time.Time     `json:"time"`            // log time of the decision
	Until     time.Time     `json:"until,omitzero"`  // end of the ban or throttle (wall clock: Redis expires the record then); zero: until lifted
	Delay     time.Duration `json:"delay,omitempty"` // a throttle's delay
	Reason    string        `json:"reason,omitempty"`
	Origin    string        `json:"origin,omitempty"` // "detector", "operator", "deny" … as the deciding node said
	Claim     bool          `json:"claim,omitempty"`  // Publish: a rule's ban, decided once for the fleet (SET NX); false: an operator's or the deny list's word, which overwrites
	Addresses []netip.Addr  `json:"addresses,omitempty"`
	// Lost is set on Events only: this node published the same (rule, key)
	// with Claim and another node's claim came first; this is the winner's
	// record, to adopt.
	Lost bool `json:"-"`
}

// Event is what the daemon applies: others' units, others' decisions.
type Event struct {
	Adds      []Add
	Decisions []Decision
}

// NodeInfo is one node as it last wrote itself into Redis.
type NodeInfo struct {
	Node     string
	LastSync time.Time
	Lag      time.Duration
	Degraded bool
}

// Status is this node's side of the fleet.
type Status struct {
	Degraded      bool
	Err           string // the last failure while degraded
	LastSync      time.Time
	Lag           time.Duration // the last exchange's round trip
	Queued        int           // publications waiting for Redis
	Dropped       int64         // publications dropped (QueueMax), since Open
	Pending       int           // deltas waiting
	DroppedDeltas int64         // pending entries dropped (more than a million waiting), since Open
}

// Redis names (see the package documentation).
const (
	keyBans   = "logjail:bans"
	keyEvents = "logjail:events"
	keyEpoch  = "logjail:epoch"
	keyNodes  = "logjail:nodes"

	streamMaxLen   = 100000
	reconcileEvery = 5 * time.Second
	sweepEvery     = time.Second
	defaultPending = 1_000_000
	eventsBuffer   = 64
	// maxSpare is the largest pending map an exchange keeps, emptied,
	// for the next one (a larger one, after an outage, is let go).
	maxSpare = 1 << 17
	// perCommand is the deadline a pipeline gets per command, and per
	// (rule, key) a script call carries, on top of the base timeout: an
	// exchange of 1,000 changed keys may take 0.65 s
	// (a loaded machine's Redis needs a third of that) before it counts as
	// a failure.
	perCommand = 500 * time.Microsecond
)

// Node is this node's end of the fleet. Send, Publish, Status and Events
// are safe from any goroutine and never wait on Redis; Run does the work.
type Node struct {
	cfg     Config
	timeout time.Duration         // every Redis call's deadline
	rdb     redis.UniversalClient // exchanges, reconcile, Nodes
	srd     redis.UniversalClient // the stream reader's own connection
	cluster bool                  // rdb and srd are Redis Cluster clients: a script call carries keys of one slot only
	sha     string
	now     func() time.Time
	events  chan Event

	closed    chan struct{}
	closeOnce sync.Once
	runDone   chan struct{}
	kick      chan struct{} // tells the stream reader that lastID is set

	mu            sync.Mutex
	running       bool
	maxPending    int
	pending       map[dkey]pend
	queue         []Decision
	dropped       int64
	droppedDeltas int64
	degraded      bool
	errText       string
	lastSync      time.Time
	lag           time.Duration
	known         map[rk]knownDecision // active bans and throttles, delivered or published
	seq           uint64               // numbers what known learns
	lastID        string               // the stream's position; "" until the first reconcile
	idGen         uint64               // changes when lastID is reset

	// Run's goroutine only.
	keys          map[rk]*keyInfo
	watching      []*keyInfo        // the keys followed up (left > 0)
	exchNo        uint64            // numbers the exchanges
	spec          []byte            // a script call's ARGV[3], reused
	names         []byte            // a script call's KEYS, reused
	stage         staged            // the window calls of the exchange under way
	spare         map[dkey]pend     // an empty pending map for the next exchange
	epochs        map[string]string // the epochs known, by key (epochKeys); empty until the first reconcile
	epochKeys     []string          // the epoch keys checked (one per primary on a cluster)
	evEpoch       string            // a cluster's epoch key on the stream's slot
	loaded        bool
	reconciled    bool
	connected     bool // once connected: a recovery logs "reconnected"
	failLogged    bool // the failure since the last success is logged
	lastReconcile time.Time
	lastSweep     time.Time
}

type knownDecision struct {
	d   Decision
	seq uint64
}

// Open checks c, reads the password file and the CA, and prepares the
// clients; it does not need Redis to be up (Run starts degraded and
// catches up).
func Open(ctx context.Context, c Config) (*Node, error) {
	if c.Node == "" {
		return nil, errors.New("fleet: node: empty (every node needs a name unique in the fleet)")
	}
	if c.Sync == 0 {
		c.Sync = 200 * time.Millisecond
	}
	if c.Sync < 10*time.Millisecond {
		return nil, fmt.Errorf("fleet: sync: %s: below 10ms", c.Sync)
	}
	if c.QueueMax == 0 {
		c.QueueMax = 10000
	}
	if c.QueueMax < 0 {
		return nil, fmt.Errorf("fleet: queue_max: %d: negative", c.QueueMax)
	}
	var pw string
	if c.PasswordFile != "" {
		var err error
		if pw, err = readPassword(c.PasswordFile); err != nil {
			return nil, err
		}
	}
	timeout := max(c.Sync*3/4, 150*time.Millisecond)
	n := &Node{
		cfg:        c,
		timeout:    timeout,
		sha:        redis.NewScript(windowScript).Hash(),
		now:        time.Now,
		events:     make(chan Event, eventsBuffer),
		closed:     make(chan struct{}),
		runDone:    make(chan struct{}),
		kick:       make(chan struct{}, 1),
		maxPending: defaultPending,
		pending:    make(map[dkey]pend),
		known:      make(map[rk]knownDecision),
		keys:       make(map[rk]*keyInfo),
		epochs:     make(map[string]string),
		degraded:   true,
		errText:    "not connected yet",
	}
	if c.Cluster {
		if err := n.openCluster(pw); err != nil {
			return nil, err
		}
		return n, nil
	}
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("fleet: redis URL %q: %w", redactURL(c.URL), err)
	}
	if pw != "" {
		opt.Password = pw
	}
	if opt.TLSConfig, err = tlsConfig(c, opt.TLSConfig); err != nil {
		return nil, err
	}
	opt.ClientName = "logjail-" + c.Node
	opt.Protocol = 2
	opt.MaxRetries = -1 // the next exchange is the retry
	opt.DialerRetries = 1
	// Every call carries its deadline in its context (ContextTimeoutEnabled);
	// the socket timeouts are only a backstop.
	opt.DialTimeout, opt.PoolTimeout = timeout, timeout
	opt.ReadTimeout, opt.WriteTimeout = 30*time.Second, 30*time.Second
	opt.ContextTimeoutEnabled = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	opt.PoolSize = 4
	sopt := *opt
	sopt.PoolSize = 1
	n.rdb, n.srd = redis.NewClient(opt), redis.NewClient(&sopt)
	return n, nil
}

// openCluster makes n's clients of a Redis Cluster: the URL is one seed,
// more seeds in its addr= parameters; the clients learn the slot map from
// any seed that answers and follow it (MOVED, ASK), with the same
// deadlines, password and TLS as for one Redis, per primary.
func (n *Node) openCluster(pw string) error {
	c := n.cfg
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("fleet: redis URL %q: %w", redactURL(c.URL), err)
	}
	if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
		return fmt.Errorf("fleet: redis URL %q: database %s: a Redis Cluster has database 0 only", redactURL(c.URL), db)
	}
	opt, err := redis.ParseClusterURL(c.URL)
	if err != nil {
		return fmt.Errorf("fleet: redis URL %q: %w", redactURL(c.URL), err)
	}
	if pw != "" {
		opt.Password = pw
	}
	if opt.TLSConfig, err = tlsConfig(c, opt.TLSConfig); err != nil {
		return err
	}
	opt.ClientName = "logjail-" + c.Node
	opt.Protocol = 2
	opt.MaxRetries = -1 // the next exchange is the retry
	opt.DialerRetries = 1
	opt.DialTimeout, opt.PoolTimeout = n.timeout, n.timeout
	opt.ReadTimeout, opt.WriteTimeout = 30*time.Second, 30*time.Second
	opt.ContextTimeoutEnabled = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	opt.PoolSize = 4 // per primary
	sopt := *opt
	sopt.PoolSize = 1
	n.rdb, n.srd = redis.NewClusterClient(opt), redis.NewClusterClient(&sopt)
	n.cluster = true
	return nil
}

// tlsConfig completes the TLS configuration the URL gave (nil: not
// rediss://) with c's CA file and TLS 1.2 at least.
func tlsConfig(c Config, t *tls.Config) (*tls.Config, error) {
	if c.CAFile != "" {
		if t == nil {
			return nil, fmt.Errorf("fleet: ca_file %s: the URL is not rediss:// (TLS)", c.CAFile)
		}
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("fleet: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fleet: ca_file %s: no PEM certificate in it", c.CAFile)
		}
		t.RootCAs = pool
	}
	if t != nil && t.MinVersion < tls.VersionTLS12 {
		t.MinVersion = tls.VersionTLS12
	}
	return t, nil
}

// readPassword returns the first line of file.
func readPassword(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("fleet: password_file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("fleet: password_file %s: %w", file, err)
	}
	pw := strings.TrimRight(sc.Text(), "\r")
	if pw == "" {
		return "", fmt.Errorf("fleet: password_file %s: line 1: empty", file)
	}
	return pw, nil
}

// redactURL hides the password of a Redis URL for error messages.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return u
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}

// Send adds this node's new counts to the pending deltas (coalesced by
// rule, key, limit and bucket); it never blocks on Redis.
func (n *Node) Send(ds []Delta) {
	n.mu.Lock()
	addPending(n.pending, ds)
	n.trimPending()
	n.mu.Unlock()
}

// Publish queues a decision for the next exchange; it never blocks on
// Redis. A decision without Node is this node's.
func (n *Node) Publish(d Decision) {
	if d.Node == "" {
		d.Node = n.cfg.Node
	}
	d.Lost = false
	n.mu.Lock()
	n.queue = append(n.queue, d)
	n.trimQueue()
	n.mu.Unlock()
}

// trimQueue drops the oldest publications past QueueMax; n.mu is held.
func (n *Node) trimQueue() {
	if over := len(n.queue) - n.cfg.QueueMax; over > 0 {
		n.queue = slices.Delete(n.queue, 0, over)
		n.dropped += int64(over)
	}
}

// Events is what the daemon applies: other nodes' units and decisions,
// and the winner's record of a claim this node lost. Run closes it when
// it returns.
func (n *Node) Events() <-chan Event { return n.events }

// Status reports this node's side of the fleet.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Status{Degraded: n.degraded, LastSync: n.lastSync, Lag: n.lag, Queued: len(n.queue),
		Dropped: n.dropped, Pending: len(n.pending), DroppedDeltas: n.droppedDeltas}
	if n.degraded {
		s.Err = n.errText
	}
	return s
}

// nodeRecord is a node's entry in logjail:nodes.
type nodeRecord struct {
	LastSync int64 `json:"last_sync_ms"`
	Lag      int64 `json:"lag_us"`
	Degraded bool  `json:"degraded"`
}

// Nodes reads every node seen (logjail:nodes), by name. A node is shown
// degraded when it said so, or when it has not written for five syncs
// (at least 2 s): it is away from Redis, or gone.
func (n *Node) Nodes(ctx context.Context) ([]NodeInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	m, err := n.rdb.HGetAll(ctx, keyNodes).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: %w", keyNodes, err)
	}
	stale := max(5*n.cfg.Sync, 2*time.Second)
	now := n.now()
	out := make([]NodeInfo, 0, len(m))
	for name, v := range m {
		var r nodeRecord
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, fmt.Errorf("fleet: %s: node %q: %w", keyNodes, name, err)
		}
		last := time.UnixMilli(r.LastSync)
		out = append(out, NodeInfo{Node: name, LastSync: last, Lag: time.Duration(r.Lag) * time.Microsecond,
			Degraded: r.Degraded || now.Sub(last) > stale})
	}
	slices.SortFunc(out, func(a, b NodeInfo) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// Run is the node's loop: an exchange every Sync, the stream reader, a
// reconcile at start, after Redis comes back and every 5 s. It returns
// nil when ctx ends or Close is called, and closes Events.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.running {
		n.mu.Unlock()
		return errors.New("fleet: Run called twice")
	}
	n.running = true
	n.mu.Unlock()
	defer close(n.runDone)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		close(n.events)
	}()
	wg.Go(func() {
		select {
		case <-n.closed:
			cancel()
		case <-ctx.Done():
		}
	})
	wg.Go(func() { n.readStream(ctx) })

	tick := time.NewTicker(n.cfg.Sync)
	defer tick.Stop()
	for {
		n.cycle(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// cycle is one exchange, and a reconcile when one is due.
func (n *Node) cycle(ctx context.Context) {
	now := n.now()
	if now.Sub(n.lastSweep) >= sweepEvery {
		n.forgetAbsorbed(now)
		n.lastSweep = now
	}
	lostData, err := n.exchange(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		n.setDegraded(err)
		return
	}
	n.mu.Lock()
	was := n.degraded
	n.mu.Unlock()
	if was || lostData || !n.reconciled || now.Sub(n.lastReconcile) >= reconcileEvery {
		if err := n.reconcile(ctx); err != nil {
			if ctx.Err() == nil {
				n.setDegraded(err)
			}
			return
		}
	}
	n.mu.Lock()
	n.degraded, n.errText = false, ""
	n.mu.Unlock()
	n.failLogged = false
	if was && n.cfg.Logf != nil {
		if n.connected {
			n.cfg.Logf("fleet: reconnected")
		} else {
			n.cfg.Logf("fleet: connected")
		}
	}
	n.connected = true
}

// setDegraded records a failure, logging it once per change.
func (n *Node) setDegraded(err error) {
	n.mu.Lock()
	n.degraded, n.errText = true, err.Error()
	n.mu.Unlock()
	if !n.failLogged && n.cfg.Logf != nil {
		n.cfg.Logf("fleet: degraded: %v", err)
	}
	n.failLogged = true
}

// exchange is one pipelined round trip (two when a claim needs
// resolving): the pending deltas, the queued publications, this node's
// entry in logjail:nodes and the epoch. It reports whether the epoch
// changed (Redis lost its data).
func (n *Node) exchange(ctx context.Context) (lostData bool, err error) {
	if n.cluster && !n.loaded {
		// A pipeline sends a command without a key (SCRIPT LOAD) to one
		// primary; the script must be on every one.
		cctx, cancel := context.WithTimeout(ctx, n.timeout)
		err := n.rdb.ScriptLoad(cctx, windowScript).Err()
		cancel()
		if err != nil {
			return false, fmt.Errorf("fleet: SCRIPT LOAD: %w", err)
		}
		n.loaded = true
	}
	n.mu.Lock()
	pending := n.pending
	if n.pending = n.spare; n.pending == nil {
		n.pending = make(map[dkey]pend, len(pending))
	}
	n.spare = nil
	queue := n.queue
	n.queue = nil
	wasDegraded := n.degraded
	lag := n.lag
	n.mu.Unlock()

	pipe := n.rdb.Pipeline()
	var load *redis.StringCmd
	if !n.loaded && !n.cluster {
		load = pipe.ScriptLoad(ctx, windowScript)
	}
	st := n.stageWindows(ctx, pipe, pending)
	if len(pending) <= maxSpare {
		// Taken: the next exchange's pending, emptied, without a new map
		// of as many entries every sync.
		clear(pending)
		n.spare = pending
	}
	pubs := n.stagePublish(ctx, pipe, queue)
	epochs := make([]*redis.StringCmd, len(n.epochKeys))
	for i, k := range n.epochKeys {
		epochs[i] = pipe.Get(ctx, k)
	}
	rec, _ := json.Marshal(nodeRecord{LastSync: n.now().UnixMilli(), Lag: lag.Microseconds(), Degraded: wasDegraded && n.connected})
	hset := pipe.HSet(ctx, keyNodes, n.cfg.Node, rec)
	// A large exchange is not a partition: its deadline grows with it.
	cctx, cancel := context.WithTimeout(ctx, n.timeout+time.Duration(pipe.Len()+st.keys)*perCommand)
	defer cancel()
	start := time.Now()
	err = execPipe(cctx, pipe)
	rtt := time.Since(start)
	if err != nil {
		// The round trip failed: nothing of it counts. Deltas go back to
		// pending (a script that ran before the cut counts twice: the
		// exchange is at least once), publications back to the queue.
		n.restore(st)
		n.requeue(queue)
		return false, err
	}
	if load != nil && load.Err() == nil {
		n.loaded = true
	}
	adds, werr := n.absorb(st, n.now())
	lost, perr := n.resolvePublish(ctx, pubs)
	var eerr error
	for i, k := range n.epochKeys {
		e, err := epochs[i].Result()
		switch {
		case err == nil || errors.Is(err, redis.Nil):
			lostData = lostData || n.epochChanged(k, e)
		case eerr == nil:
			// On a cluster every primary holds an epoch: one that does
			// not answer makes the node degraded even when nothing else
			// of this exchange was on it.
			eerr = fmt.Errorf("fleet: %s: %w", k, err)
		}
	}
	// On a cluster, a primary away fails only the commands of its slots:
	// the others' results are taken above (absorbed, published), the
	// failed ones are pending or queued again, and the node is degraded.
	herr := hset.Err()
	if herr != nil {
		herr = fmt.Errorf("fleet: %s: %w", keyNodes, herr)
	} else {
		n.mu.Lock()
		n.lastSync, n.lag = n.now(), rtt
		n.mu.Unlock()
	}
	if len(adds) > 0 || len(lost) > 0 {
		n.deliver(ctx, Event{Adds: adds, Decisions: lost})
	}
	return lostData, errors.Join(werr, perr, herr, eerr)
}

// requeue puts publications that did not reach Redis back in front of the
// queue.
func (n *Node) requeue(ds []Decision) {
	if len(ds) == 0 {
		return
	}
	n.mu.Lock()
	n.queue = append(ds, n.queue...)
	n.trimQueue()
	n.mu.Unlock()
}

// deliver sends ev to Events, waiting for the reader or the end of ctx.
func (n *Node) deliver(ctx context.Context, ev Event) {
	select {
	case n.events <- ev:
	case <-ctx.Done():
	}
}

// Close stops Run (if it runs), waits for it, and closes the connections.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { close(n.closed) })
	n.mu.Lock()
	running := n.running
	n.mu.Unlock()
	if running {
		<-n.runDone
	}
	return errors.Join(n.rdb.Close(), n.srd.Close())
}

// execPipe runs pipe and returns its error when the round trip itself
// failed (no connection, AUTH refused, deadline), which go-redis reports
// from Exec alone, leaving each command's Err nil. A command's own error
// (and redis.Nil) is left to its caller.
func execPipe(ctx context.Context, pipe redis.Pipeliner) error {
	cmds, err := pipe.Exec(ctx)
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if c.Err() != nil {
			return nil
		}
	}
	return err
}

// newEpoch is a random epoch value.
func newEpoch() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
