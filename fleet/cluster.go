package fleet

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// keySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM:
// polynomial 0x1021, initial value 0) of its hash tag (the part between
// the first '{' and the next '}', when not empty) or of the whole key,
// modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// epochKey is the name of the epoch kept on hash slot tag's slot.
func epochKey(tag int) string { return keyEpoch + ":{" + strconv.Itoa(tag) + "}" }

// epochTag is the smallest tag whose epoch key lies in [lo, hi].
func epochTag(lo, hi int) int {
	for tag := 0; ; tag++ {
		if s := keySlot(epochKey(tag)); s >= lo && s <= hi {
			return tag
		}
	}
}

// epochKeys names the epochs a node checks (see the package
// documentation). On one Redis: logjail:epoch alone. On a cluster:
// logjail:epoch and one logjail:epoch:{TAG} on each primary, so that any
// primary that restarted without its data is noticed. The primary that
// holds logjail:events keeps its epoch on the stream's own slot (the
// first key returned after logjail:epoch), so that a node tells that the
// stream itself is new (it then reads it from its start) from another
// primary's loss. slots is the cluster's slot map (CLUSTER SLOTS);
// evEpoch is the epoch key on the stream's slot (streamEpochKey).
func epochKeys(slots []redis.ClusterSlot, evEpoch string) []string {
	keys := []string{keyEpoch}
	if slots == nil {
		return keys
	}
	ev := keySlot(keyEvents)
	first := map[string]redis.ClusterSlot{} // each primary's lowest range
	var evOwner string
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		id := s.Nodes[0].ID
		if id == "" {
			id = s.Nodes[0].Addr
		}
		if f, ok := first[id]; !ok || s.Start < f.Start {
			first[id] = s
		}
		if ev >= s.Start && ev <= s.End {
			evOwner = id
		}
	}
	if evOwner != "" {
		keys = append(keys, evEpoch)
	}
	var rest []string
	for id, s := range first {
		if id != evOwner {
			rest = append(rest, epochKey(epochTag(s.Start, s.End)))
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

// streamEpochKey is the epoch key on logjail:events's own slot.
func streamEpochKey() string {
	ev := keySlot(keyEvents)
	return epochKey(epochTag(ev, ev))
}

// readEpochKeys sets n.epochKeys from the cluster's slot map (one CLUSTER
// SLOTS); on one Redis it is logjail:epoch alone. Run's goroutine only.
func (n *Node) readEpochKeys(ctx context.Context) error {
	if !n.cluster {
		n.epochKeys = epochKeys(nil, "")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	slots, err := n.rdb.ClusterSlots(cctx).Result()
	if err != nil {
		return fmt.Errorf("fleet: CLUSTER SLOTS: %w", err)
	}
	if n.evEpoch == "" {
		n.evEpoch = streamEpochKey()
	}
	n.epochKeys = epochKeys(slots, n.evEpoch)
	return nil
}

// epochChanged says whether an epoch this node knew is missing or has
// another value (got: the value read, "" when missing).
func (n *Node) epochChanged(key, got string) bool {
	known, ok := n.epochs[key]
	return ok && got != known
}
