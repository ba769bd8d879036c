// Package word reads the bytes of a string as a machine word, for the
// hot paths that compare or hash a few bytes at once (the parser's
// literals and times, the user-agent hash, the static-file extension),
// and an address's 128 bits as two words (Addr).
//
// Boundaries: It owns nothing but the read. It must not allocate, and it
// imports nothing of logjail's.
package word

import (
	"encoding/binary"
	"net/netip"
	"unsafe"
)

// LE is the 8 bytes of s from i, little-endian: s[i] in the low byte.
// Small enough to be inlined where it is called; s must hold them.
func LE(s string, i int) uint64 {
	w := s[i : i+8] // one bounds check, not one a byte (the compiler cannot rule out i+7's overflow)
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// Addr returns a's 128 bits as As16 gives them (an IPv4 address as its
// IPv4-mapped form; a zone left out), hi the first 64, as numbers: an
// address as the detector's, replay's and the endpoint's tables keep it.
// As16 writes the address into an array of bytes that is then read back
// as two words: the 16-byte copy of the array reads two 8-byte writes,
// which the CPU cannot forward to it, a stall of some 20 cycles, and
// replay made four keys a line at a million keys (7% of its merger).
// netip.Addr holds the same two words, hi first (its uint128): Addr reads
// them there when addrWordsOK, which init sets only after checking, on
// addresses of every kind, that the words read there are As16's;
// otherwise (another layout in another Go release) it takes As16's way.
// Either way the result is As16's (TestAddrAsAs16).
func Addr(a netip.Addr) (hi, lo uint64) {
	if addrWordsOK {
		w := (*[2]uint64)(unsafe.Pointer(&a))
		return w[0], w[1]
	}
	return addrAs16(a)
}

func addrAs16(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// addrWordsOK: netip.Addr begins with its 128 bits as two words, hi
// first (Addr).
var addrWordsOK = addrWordsCheck()

func addrWordsCheck() bool {
	if unsafe.Sizeof(netip.Addr{}) < 16 || unsafe.Alignof(netip.Addr{}) < 8 {
		return false
	}
	for _, s := range []string{"0.0.0.0", "1.2.3.4", "255.254.253.252", "::", "::1", "::ffff:1.2.3.4",
		"2001:db8:102:304:506:708:90a:b0c", "fe80::1:2%eth0", "ffff:fffe:fffd:fffc:fffb:fffa:fff9:fff8"} {
		a := netip.MustParseAddr(s)
		w := (*[2]uint64)(unsafe.Pointer(&a))
		if hi, lo := addrAs16(a); w[0] != hi || w[1] != lo {
			return false
		}
	}
	return true
}
