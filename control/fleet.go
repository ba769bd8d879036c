package control

import "time"

// FleetStatus is a node's view of its fleet (the configuration's
// `fleet:`), in a live status: its own link to Redis and the nodes Redis
// has heard from.
type FleetStatus struct {
	Node  string `json:"node"`
	Redis string `json:"redis"` // the URL, without its password
	// Degraded: the last exchange with Redis failed; the node works alone
	// on its own windows and bans and catches up when Redis answers.
	Degraded   bool       `json:"degraded"`
	Error      string     `json:"error,omitempty"`
	LastSync   *time.Time `json:"last_sync"` // the last exchange that succeeded
	LagSeconds float64    `json:"lag_seconds"`
	// Queued are decisions waiting to be published; Dropped those the
	// queue's bound dropped while Redis was away (oldest first); Pending
	// the window deltas waiting to be sent.
	Queued  int   `json:"queued"`
	Dropped int64 `json:"dropped"`
	Pending int   `json:"pending"`
	// UnknownRules counts the other nodes' decisions of rules this
	// node's configuration lacks (skipped).
	UnknownRules int64       `json:"unknown_rules"`
	Nodes        []FleetNode `json:"nodes"`
	NodesError   string      `json:"nodes_error,omitempty"`
}

// FleetNode is a node of the fleet as Redis last heard from it.
type FleetNode struct {
	Node       string     `json:"node"`
	LastSync   *time.Time `json:"last_sync"`
	LagSeconds float64    `json:"lag_seconds"`
	Degraded   bool       `json:"degraded"`
}
