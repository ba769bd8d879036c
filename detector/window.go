package detector

import (
	"fmt"
	"strings"
	"time"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

// ruleInfo is a rule compiled for the detector.
type ruleInfo struct {
	rule  *rules.Rule
	id    int32  // by name: states survive a reload of the same rule
	ci    uint16 // its place in Detector.infos, which states name it by
	refs  int    // states built for it
	lims  []limitInfo
	all   bool   // combine: all
	fleet bool   // a fleet rule under Options.Fleet: its charges are journaled
	span  int64  // longest window, ns: addresses seen within it are listed
	fp    uint64 // fingerprint of lims, saved with each state (snapshot.go)
}

// limitInfo is one limit compiled for the detector (limits.Compile): its
// kind's window arithmetic works on it. It is comparable, so that a reload
// can tell whether a state's windows still fit.
type limitInfo = limits.Compiled

// window is the state of one limit of one key (limits.Window): no pointer,
// its ring in the detector's ring pool (d.rings) when longer than two.
type window = limits.Window

func compileRule(r *rules.Rule, id int32) *ruleInfo {
	ri := &ruleInfo{rule: r, id: id, all: r.Combine == rules.CombineAll, span: int64(time.Second)}
	for j := range r.Limits {
		li := limits.Compile(&r.Limits[j])
		ri.span = max(ri.span, li.Window)
		ri.lims = append(ri.lims, li)
	}
	ri.fp = limits.Fingerprint(ri.lims)
	return ri
}

// measure charges c at ns to every window of s and reports whether the rule's
// limits are over. d.vals and d.overs hold each limit's value and verdict.
func (d *Detector) measure(i int32, s *state, ri *ruleInfo, ns int64, c *rules.Charge) bool {
	lims := ri.lims
	cost := limits.Cost{CPU: c.CPU, Duration: c.Duration}
	switch len(lims) {
	case 0:
		return false
	case 1:
		// One limit (most rules): the loop's steps without the loop;
		// over is that limit's verdict, whether all or any must be.
		li := &lims[0]
		v, o := li.Charge(&s.win0, &d.rings, ns, cost)
		if ri.fleet {
			d.note(i, 0, li, ns, cost)
		}
		if d.peakW > 0 {
			p := &d.peakRows[i>>chunkBits][int(i&(1<<chunkBits-1))*d.peakW]
			*p = li.Worse(*p, v)
		}
		d.vals[0], d.overs[0] = v, o
		return o
	}
	// The state's row of peaks (peak), found once for all its limits.
	var peaks []float64
	if d.peakW > 0 {
		k := int(i&(1<<chunkBits-1)) * d.peakW
		peaks = d.peakRows[i>>chunkBits][k : k+len(lims)]
	}
	vals, overs := d.vals[:len(lims)], d.overs[:len(lims)]
	over := ri.all
	for j := range lims {
		li := &lims[j]
		v, o := li.Charge(d.win(s, j), &d.rings, ns, cost)
		if ri.fleet {
			d.note(i, j, li, ns, cost)
		}
		if peaks != nil {
			peaks[j] = li.Worse(peaks[j], v)
		}
		vals[j], overs[j] = v, o
		if ri.all {
			over = over && o
		} else {
			over = over || o
		}
	}
	return over
}

// overReason says which limits were over, for a person.
func (d *Detector) overReason(ri *ruleInfo) string {
	var b strings.Builder
	for j := range ri.lims {
		if !d.overs[j] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" and ")
		}
		li := &ri.lims[j]
		li.Kind.Explain(&b, li, d.vals[j])
	}
	if d.sig != "" {
		// A `signatures:` rule: what the entry that tipped it matched.
		fmt.Fprintf(&b, ", signature %s", d.sig)
	}
	if d.fleetReason || ri.fleet {
		fmt.Fprintf(&b, " (rule %s, fleet)", ri.rule.Name)
	} else {
		fmt.Fprintf(&b, " (rule %s)", ri.rule.Name)
	}
	return b.String()
}
