package replay

import (
	"container/heap"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// What the HTML page (WriteHTML) draws that the Report does not hold, kept
// only when Options.Charts asks for it: per rule, the window values of its
// busiest keys at their charges, and the keys closest to its limits that it
// did not ban.
const (
	// chartKeys is how many keys per rule have a series kept while the
	// log is replayed: the heavy hitters of a space-saving count (a new
	// key takes the place, and the count, of the lightest), so that any
	// key with more than 1/chartKeys of the rule's weight is among them.
	chartKeys = 64
	// chartPoints bounds a key's series: when it is full, pairs of points
	// merge into one (the severer value of each limit, the later time) and
	// each point covers twice as many charges, so that the peak survives.
	chartPoints = 500
	// nearKeys is how many near misses a rule lists.
	nearKeys = 10
)

// charts collects the series and near misses of every rule.
type charts struct {
	cfg     *rules.Config
	byRule  map[*rules.Rule]*ruleCharts
	kc      rules.KeyCache
	charges []rules.Charge // of the entry being replayed
	counts  []int64        // per charge: detector.Charged before it
}

func newCharts(cfg *rules.Config) *charts {
	return &charts{cfg: cfg, byRule: map[*rules.Rule]*ruleCharts{}}
}

// ruleCharts is one rule's share of the charts.
type ruleCharts struct {
	rule     *rules.Rule
	requests bool      // the keys weigh by requests (rateRule), else by CPU and duration seconds
	div      []float64 // per limit: the detector's value over this is the limit's as written
	lower    []bool    // per limit: a smaller value is the severer (last N's span)
	keys     map[string]*keySeries
	heap     seriesHeap // the lightest key first: the one a new key replaces
	near     []nearMiss // the closest first
}

// keySeries is one key's sampled window values.
type keySeries struct {
	key    string
	weight float64 // the space-saving count: an overestimate, only for keeping the heaviest
	idx    int     // in ruleCharts.heap
	stride int64   // charges per point
	group  int64   // charges in acc
	acc    point
	pts    []point
}

// point is a key's window values at a log time: the severest of the
// charges it covers, per limit (NaN: no value yet, as last N before N
// requests).
type point struct {
	t int64 // unix ms, of the last charge it covers
	v []float64
}

// nearMiss is a key a rule tracked and did not ban, with how close its
// peak came to the limits: the largest ratio over its limits (1 at a limit).
type nearMiss struct {
	key      string
	ratio    float64
	requests int64
	peaks    []float64
}

type seriesHeap []*keySeries

func (h seriesHeap) Len() int           { return len(h) }
func (h seriesHeap) Less(i, j int) bool { return h[i].weight < h[j].weight }
func (h seriesHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *seriesHeap) Push(x any) {
	ks := x.(*keySeries)
	ks.idx = len(*h)
	*h = append(*h, ks)
}
func (h *seriesHeap) Pop() any {
	old := *h
	ks := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return ks
}

func (c *charts) rule(r *rules.Rule) *ruleCharts {
	rc := c.byRule[r]
	if rc == nil {
		rc = &ruleCharts{rule: r, requests: rateRule(r), keys: map[string]*keySeries{}}
		for _, l := range r.Limits {
			div := 1.0
			if l.OfMachine && c.cfg.Cores > 0 {
				div = float64(c.cfg.Cores) // as Report.finish: a share of all the cores
			}
			rc.div = append(rc.div, div)
			rc.lower = append(rc.lower, l.Kind.Traits().Lower)
		}
		c.byRule[r] = rc
	}
	return rc
}

// before classifies e before the pipeline charges it (the pipeline keeps
// its charges to itself; the rules give the same ones) and notes how many
// requests the detector has charged to each of its keys so far; after
// then reads back the windows of the keys it charged: a request blocked
// while its key is banned moves no count, and is no point.
func (c *charts) before(det *detector.Detector, src *rules.Source, e *parser.Entry) {
	c.charges, _ = c.cfg.ClassifyCached(&c.kc, src, e, c.charges[:0])
	c.counts = c.counts[:0]
	for i := range c.charges {
		n, _ := det.ChargedOf(&c.charges[i])
		c.counts = append(c.counts, n)
	}
}

// after records the charges of e that before noted.
func (c *charts) after(det *detector.Detector, e *parser.Entry) {
	for i := range c.charges {
		ch := &c.charges[i]
		rc := c.rule(ch.Rule)
		w := 1.0
		if !rc.requests {
			w = ch.CPU + ch.Duration
		}
		ks := rc.admit(ch.Key, w)
		n, ok := det.ChargedOf(ch)
		if !ok || n == c.counts[i] {
			continue // not tracked, or blocked while banned: not charged
		}
		q, ok := det.QueryOf(ch, e.Time)
		if !ok {
			continue
		}
		ks.add(e.Time, q.Limits, rc)
	}
}

// admit returns key's series, adding weight w to it; a key not kept takes
// the place and the weight of the lightest when the rule keeps chartKeys.
func (rc *ruleCharts) admit(key string, w float64) *keySeries {
	if ks := rc.keys[key]; ks != nil {
		ks.weight += w
		heap.Fix(&rc.heap, ks.idx)
		return ks
	}
	ks := &keySeries{}
	if len(rc.heap) >= chartKeys {
		ks = heap.Pop(&rc.heap).(*keySeries)
		delete(rc.keys, ks.key)
		*ks = keySeries{weight: ks.weight, pts: ks.pts[:0], acc: point{v: ks.acc.v}}
	}
	ks.key, ks.weight, ks.stride = strings.Clone(key), ks.weight+w, 1
	rc.keys[ks.key] = ks
	heap.Push(&rc.heap, ks)
	return ks
}

// add counts one charge of the key at t, its windows ls just after it.
func (ks *keySeries) add(t time.Time, ls []detector.LimitState, rc *ruleCharts) {
	if ks.group == 0 {
		ks.acc.v = ks.acc.v[:0]
		for range rc.div {
			ks.acc.v = append(ks.acc.v, math.NaN())
		}
	}
	for j := range min(len(ls), len(ks.acc.v)) {
		v := ls[j].Value / rc.div[j]
		ks.acc.v[j] = severer(rc.lower[j], ks.acc.v[j], v)
	}
	ks.acc.t = t.UnixMilli()
	ks.group++
	if ks.group >= ks.stride {
		ks.flush(rc)
	}
}

// flush ends the group of charges acc holds as a point.
func (ks *keySeries) flush(rc *ruleCharts) {
	if ks.group == 0 {
		return
	}
	if len(ks.pts) >= chartPoints {
		half := len(ks.pts) / 2
		for i := range half {
			a, b := ks.pts[2*i], ks.pts[2*i+1]
			for j := range a.v {
				a.v[j] = severer(rc.lower[j], a.v[j], b.v[j])
			}
			ks.pts[i] = point{t: b.t, v: a.v}
		}
		if len(ks.pts)%2 == 1 {
			ks.pts[half] = ks.pts[len(ks.pts)-1]
			half++
		}
		clear(ks.pts[half:])
		ks.pts = ks.pts[:half]
		ks.stride *= 2
	}
	ks.pts = append(ks.pts, point{t: ks.acc.t, v: append([]float64(nil), ks.acc.v...)})
	ks.group = 0
}

// severer is the severer of two values of a limit, NaN and ±Inf being no value.
func severer(lower bool, a, b float64) float64 {
	switch {
	case math.IsNaN(b) || math.IsInf(b, 0):
		return a
	case math.IsNaN(a):
		return b
	case lower:
		return min(a, b)
	}
	return max(a, b)
}

// threshold is where l cuts, in the terms of the report's values: the
// count of a rate, the share of a share (of all the cores for "of
// machine", as Report.finish divides the peaks), the burst of a token
// bucket, the span of last N.
func threshold(l *rules.Limit, cores int) float64 {
	switch l.Kind.(type) {
	case limits.Bucket:
		return l.Burst
	case limits.LastN:
		return l.Window.Seconds()
	case limits.Share:
		if l.OfMachine && cores > 0 {
			return l.N / float64(cores)
		}
	}
	return l.N
}

// offerNear considers a key rule tracked and did not ban, with its peaks
// (as the report writes them), for the rule's near misses.
func (c *charts) offerNear(r *rules.Rule, key string, requests int64, peak []float64) {
	rc := c.rule(r)
	ratio := math.Inf(-1)
	for li, l := range r.Limits {
		if li >= len(peak) || math.IsNaN(peak[li]) || math.IsInf(peak[li], 0) {
			continue
		}
		thr, v := threshold(&l, c.cfg.Cores), peak[li]
		var x float64
		switch {
		case l.Kind.Traits().Lower && v > 0:
			x = thr / v
		case !l.Kind.Traits().Lower && thr > 0:
			x = v / thr
		default:
			continue
		}
		ratio = max(ratio, x)
	}
	if math.IsInf(ratio, -1) || ratio <= 0 {
		return
	}
	n := len(rc.near)
	if n == nearKeys && !(ratio > rc.near[n-1].ratio) {
		return
	}
	i := 0
	for i < n && rc.near[i].ratio >= ratio {
		i++
	}
	if n < nearKeys {
		rc.near = append(rc.near, nearMiss{})
	}
	copy(rc.near[i+1:], rc.near[i:len(rc.near)-1])
	rc.near[i] = nearMiss{key: strings.Clone(key), ratio: ratio, requests: requests, peaks: append([]float64(nil), peak...)}
}

// chartsJSON is the charts as the page reads them (the script element
// "charts"), beside the report itself.
type chartsJSON struct {
	Collected bool            `json:"collected"` // false: the replay kept no series (Options.Charts unset)
	Rules     []ruleChartJSON `json:"rules"`
}

type ruleChartJSON struct {
	Rule   string       `json:"rule"`
	Limits []limitJSON  `json:"limits"`
	By     string       `json:"by"` // the top list whose keys the series are: requests | cpu
	Series []seriesJSON `json:"series"`
	Near   []nearJSON   `json:"near"`
}

type limitJSON struct {
	Limit     string  `json:"limit"`
	Unit      string  `json:"unit"`
	Threshold float64 `json:"threshold"`
	Lower     bool    `json:"lower"` // a smaller value is the severer: over when below the threshold
}

type seriesJSON struct {
	Key    string      `json:"key"`
	Stride int64       `json:"charges_per_point"`
	Points []pointJSON `json:"points"` // [unix ms, value of limit 0, ...], null for no value
}

type pointJSON point

// MarshalJSON writes [t, v0, v1, ...], values rounded as the report's peaks.
func (p pointJSON) MarshalJSON() ([]byte, error) {
	b := append([]byte{'['}, strconv.FormatInt(p.t, 10)...)
	for _, v := range p.v {
		b = append(b, ',')
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, round(v, 4), 'g', -1, 64)
	}
	return append(b, ']'), nil
}

type nearJSON struct {
	Key      string     `json:"key"`
	Ratio    float64    `json:"ratio"` // the peak's closeness to the nearest limit: 1 at it
	Requests int64      `json:"requests"`
	Peaks    []*float64 `json:"peaks"`
}

// json returns the charts of the report's rules (those of the config), in
// its order; c may be nil.
func (c *charts) json(r *Report) chartsJSON {
	out := chartsJSON{Collected: c != nil, Rules: []ruleChartJSON{}}
	if c == nil {
		return out
	}
	for _, rr := range r.Rules {
		rule := r.cfg.Rule(rr.Name)
		if rule == nil {
			continue
		}
		rc := c.rule(rule)
		rj := ruleChartJSON{Rule: rule.Name, By: "requests", Series: []seriesJSON{}, Near: []nearJSON{}}
		for _, l := range rule.Limits {
			rj.Limits = append(rj.Limits, limitJSON{Limit: l.Text, Unit: l.Kind.Traits().Unit, Threshold: round(threshold(&l, r.cfg.Cores), 6), Lower: l.Kind.Traits().Lower})
		}
		var top *TopList
		for i := range r.Top {
			tl := &r.Top[i]
			if tl.Rule == rule.Name && (tl.By == "requests") == rc.requests && len(tl.Keys) > 0 {
				top = tl
			}
		}
		for i := range r.Top {
			if tl := &r.Top[i]; top == nil && tl.Rule == rule.Name && tl.By == "requests" {
				top = tl
			}
		}
		if top != nil {
			rj.By = top.By
			for _, k := range top.Keys {
				ks := rc.keys[k.Key]
				if ks == nil {
					continue
				}
				ks.flush(rc)
				if len(ks.pts) == 0 {
					continue
				}
				sj := seriesJSON{Key: ks.key, Stride: ks.stride}
				for _, p := range ks.pts {
					sj.Points = append(sj.Points, pointJSON(p))
				}
				rj.Series = append(rj.Series, sj)
			}
		}
		for _, n := range rc.near {
			nj := nearJSON{Key: n.key, Ratio: round(n.ratio, 4), Requests: n.requests}
			for _, v := range n.peaks {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					nj.Peaks = append(nj.Peaks, nil)
					continue
				}
				v = round(v, 4)
				nj.Peaks = append(nj.Peaks, &v)
			}
			rj.Near = append(rj.Near, nj)
		}
		out.Rules = append(out.Rules, rj)
	}
	return out
}
