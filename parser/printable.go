package parser

import (
	"unicode"
	"unicode/utf8"
)

// Printable returns s with every control character (C0, DEL, C1) and every
// byte that is not UTF-8 written as an escape: ESC as `\x1b`, NUL as `\x00`,
// U+009B as `\u009b`, an invalid byte as `\xNN`. Other text, backslashes
// included, is kept as it is. It is the inverse, for display, of the
// decoding of `\xNN` that nginx and Apache escapes get here: a value a
// client wrote can reach a terminal, a file name or an argv only as
// printable text. It allocates only when there is something to escape.
func Printable(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || unicode.IsControl(r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		case r < 0x80 && unicode.IsControl(r):
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		case unicode.IsControl(r):
			b = append(b, '\\', 'u', '0', '0', hex[r>>4&15], hex[r&15])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}
