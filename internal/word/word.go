// Package word reads the bytes of a string as a machine word, for the
// hot paths that compare or hash a few bytes at once (the parser's
// literals and times, the user-agent hash, the static-file extension).
//
// Boundaries: It owns nothing but the read. It must not allocate, and it
// imports nothing of logjail's.
package word

// LE is the 8 bytes of s from i, little-endian: s[i] in the low byte.
// Small enough to be inlined where it is called; s must hold them.
func LE(s string, i int) uint64 {
	w := s[i : i+8] // one bounds check, not one a byte (the compiler cannot rule out i+7's overflow)
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}
