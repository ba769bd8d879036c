package control

import (
	"errors"
	"fmt"
	"strings"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
)

// MaxBatch is the most bans one batch may hold (`logjail import`'s one
// request): 100,000 entries are about 15 MB of JSON.
const MaxBatch = 100_000

// maxBatchBody bounds the body of POST /v1/bans/batch (MaxBatch entries
// with reasons of a few hundred bytes).
const maxBatchBody = 64 << 20

// BatchBanRequest is the body of POST /v1/bans/batch: several operator
// bans made as one, all or none (`logjail import`).
type BatchBanRequest struct {
	Bans []BanRequest `json:"bans"`
}

// BatchBanResult is the answer to a batch of bans: one BanResult a ban,
// in the order of the request.
type BatchBanResult struct {
	Version int         `json:"version"`
	Bans    []BanResult `json:"bans"`
	Live    bool        `json:"live"` // applied by the running daemon; false: written to the database, applied when it starts
}

// maxBatchErrors is how many of a batch's refused bans its error names.
const maxBatchErrors = 20

// CheckBatch checks every ban of req as CheckBan does, and that no
// (rule, key) comes twice, changing nothing. Its error names every
// refused ban as bans[INDEX] (the first maxBatchErrors of them) and wraps
// ErrAllowed when each was refused for the allow list, else
// ErrBadRequest.
func CheckBatch(cfg *rules.Config, req BatchBanRequest) ([]*CheckedBan, error) {
	if len(req.Bans) == 0 {
		return nil, errf(ErrBadRequest, "an empty batch: no ban given")
	}
	if len(req.Bans) > MaxBatch {
		return nil, errf(ErrBadRequest, "%d bans in one batch: at most %d", len(req.Bans), MaxBatch)
	}
	cs := make([]*CheckedBan, len(req.Bans))
	seen := make(map[[2]string]int, len(req.Bans))
	var msgs []string
	refused, allowed := 0, 0
	for i, r := range req.Bans {
		c, err := CheckBan(cfg, r)
		if err == nil {
			rule := OperatorRule
			if c.Rule != nil {
				rule = c.Rule.Name
			}
			k := [2]string{rule, c.Target.Key}
			if j, dup := seen[k]; dup {
				err = errf(ErrBadRequest, "%s: banned by bans[%d] already", c.Target.Key, j)
			}
			seen[k] = i
		}
		if err != nil {
			refused++
			if errors.Is(err, ErrAllowed) {
				allowed++
			}
			if len(msgs) < maxBatchErrors {
				msgs = append(msgs, fmt.Sprintf("bans[%d]: %v", i, err))
			}
			continue
		}
		cs[i] = c
	}
	if refused == 0 {
		return cs, nil
	}
	if refused > len(msgs) {
		msgs = append(msgs, fmt.Sprintf("and %d more", refused-len(msgs)))
	}
	base := ErrBadRequest
	if allowed == refused {
		base = ErrAllowed
	}
	return nil, errf(base, "%d of %d bans refused, none made: %s", refused, len(req.Bans), strings.Join(msgs, "; "))
}

// BanBatch bans every key of req on who's word, as Ban does each, and
// records them as one: either every ban is made or (an error) none.
func (e *Engine) BanBatch(req BatchBanRequest, who string) (*BatchBanResult, []detector.Decision, error) {
	cs, err := CheckBatch(e.Cfg, req)
	if err != nil {
		return nil, nil, err
	}
	ds := make([]detector.Decision, len(cs))
	res := &BatchBanResult{Version: SchemaVersion, Bans: make([]BanResult, len(cs))}
	for i, c := range cs {
		ds[i] = e.impose(c, who)
		res.Bans[i] = *e.result(c, &ds[i])
	}
	e.W.Decisions(ds)
	return res, ds, nil
}
