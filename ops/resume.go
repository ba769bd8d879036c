package ops

import (
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// ResumeLifts are the lifts that checkpoint.Writer.Resume(cfg, det, now)
// makes of bans, the store's active bans read just before it: a ban or
// throttle the detector made for a rule cfg no longer has, and, with a
// non-zero now (the daemon's start), a ban of a configured rule whose
// until passed while logjail was not running. Each is an unban with the
// reason Resume records in the history, for the decision log to write
// with source SourceResume (Resume hands them to no logger).
func ResumeLifts(bans []state.Ban, cfg *rules.Config, now time.Time) []detector.Decision {
	var out []detector.Decision
	for _, b := range bans {
		rule := cfg.Rule(b.Rule)
		d := detector.Decision{Rule: b.Rule, Key: b.Key, Kind: detector.Unban, Addresses: b.Addresses,
			Origin: b.Origin, LogOnly: b.LogOnly}
		switch {
		case b.Origin == state.OriginDetector && rule == nil:
			d.Reason = "rule " + b.Rule + " is no longer in the configuration"
		case b.Kind == string(detector.Throttle):
			continue
		case !now.IsZero() && rule != nil && !b.Until.IsZero() && !b.Until.After(now):
			d.Time, d.Reason = b.Until, "ban expired while logjail was not running"
		default:
			continue
		}
		out = append(out, d)
	}
	return out
}
