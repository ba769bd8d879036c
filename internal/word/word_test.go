package word

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestLEAsBinary holds LE to encoding/binary's little-endian read at every
// offset of random texts.
func TestLEAsBinary(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 7))
	for k := 0; k < 2000; k++ {
		b := make([]byte, 8+r.IntN(200))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		s := string(b)
		for i := 0; i+8 <= len(s); i++ {
			if got, want := LE(s, i), binary.LittleEndian.Uint64(b[i:]); got != want {
				t.Fatalf("LE(%q, %d) = %#x, want %#x", s, i, got, want)
			}
		}
	}
}

// TestAddrAsAs16: Addr gives As16's words for addresses of every
// kind (IPv4, IPv6, IPv4-mapped, zoned, the zero Addr), on this Go's
// layout of netip.Addr (which addrWordsCheck must have accepted: CI's Go
// is the one releases are built with) and on the As16 way it falls back
// to.
func TestAddrAsAs16(t *testing.T) {
	if !addrWordsOK {
		t.Errorf("addrWordsCheck refused this Go's netip.Addr: Addr takes the slow way")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var addrs []netip.Addr
	addrs = append(addrs, netip.Addr{}, netip.IPv6Unspecified(), netip.IPv4Unspecified())
	for range 100_000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		a6 := netip.AddrFrom16(b)
		addrs = append(addrs, a6, netip.AddrFrom4([4]byte(b[:4])), a6.WithZone("eth0"),
			netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}))
	}
	for _, ok := range []bool{addrWordsOK, false} {
		was := addrWordsOK
		addrWordsOK = ok
		for _, a := range addrs {
			hi, lo := Addr(a)
			b := a.As16()
			if hi != binary.BigEndian.Uint64(b[:8]) || lo != binary.BigEndian.Uint64(b[8:]) {
				addrWordsOK = was
				t.Fatalf("Addr(%v) with the words read in place %v = %#x %#x; As16 %x", a, ok, hi, lo, b)
			}
		}
		addrWordsOK = was
	}
}
