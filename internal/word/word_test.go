package word

import (
	"encoding/binary"
	"math/rand/v2"
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
