package parser

import "testing"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "curl/8.5.0", "curl/8.5.0"},
		{"empty", "", ""},
		{"utf-8 kept", "Mozilla/5.0 (X; ü) 日本", "Mozilla/5.0 (X; ü) 日本"},
		{"backslash kept", `a\b`, `a\b`},
		{"escape", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"nul", "bob\x00", `bob\x00`},
		{"newline and tab", "a\nb\tc\r", `a\x0ab\x09c\x0d`},
		{"del", "a\x7f", `a\x7f`},
		{"c1 csi", "a\u009b2J", `a\u009b2J`},
		{"invalid byte", "a\xffb\xc3", `a\xffb\xc3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Printable(tc.in); got != tc.want {
				t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got := Printable(tc.want); got != tc.want {
				t.Errorf("Printable is not idempotent on %q: %q", tc.want, got)
			}
		})
	}
}

func FuzzPrintable(f *testing.F) {
	f.Add("a\x1b[2J\x00\xff\u009b")
	f.Fuzz(func(t *testing.T, s string) {
		p := Printable(s)
		for _, r := range p {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == 0xfffd && !containsRune(s, 0xfffd) {
				t.Fatalf("Printable(%q) = %q holds %U", s, p, r)
			}
		}
	})
}

func containsRune(s string, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}
