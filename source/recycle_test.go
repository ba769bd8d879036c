package source

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// shortReads hands out its data in reads of random lengths.
type shortReads struct {
	data []byte
	rnd  *rand.Rand
}

func (r *shortReads) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), 1+r.rnd.IntN(700))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// TestRecycledLinesAsPlain reads random text (short and long lines, CRLF,
// empty lines, a last line with or without its newline) with a reader that
// recycles small buffers (RecycleChunks) and with a plain one: the same
// lines, numbers, offsets and truncations; and while the buffers go round,
// every line still in use (the last few, of a random number) keeps its text.
func TestRecycledLinesAsPlain(t *testing.T) {
	rnd := rand.New(rand.NewPCG(23, 41))
	for round := range 60 {
		var text bytes.Buffer
		for range 50 + rnd.IntN(3000) {
			n := rnd.IntN(120)
			if rnd.IntN(40) == 0 {
				n = rnd.IntN(3000) // longer than a buffer
			}
			for range n {
				text.WriteByte(byte('a' + rnd.IntN(26)))
			}
			if rnd.IntN(10) == 0 {
				text.WriteByte('\r')
			}
			text.WriteByte('\n')
		}
		if round%2 == 1 {
			text.WriteString("last line without its newline")
		}
		size := 128 + rnd.IntN(1024)
		plain := NewLineReader(&shortReads{bytes.Clone(text.Bytes()), rand.New(rand.NewPCG(uint64(round), 1))})
		recycled := NewLineReader(&shortReads{bytes.Clone(text.Bytes()), rand.New(rand.NewPCG(uint64(round), 2))})
		type held struct {
			line, want string
			chunk      uint64
		}
		var window []held
		keep := 1 + rnd.IntN(40)
		recycled.RecycleChunks(func() uint64 {
			if len(window) == 0 {
				return recycled.Chunk() + 1 // none held: every chunk handed out may go
			}
			return window[0].chunk
		}, size)
		lines := 0
		for {
			want, wn, wok := plain.Next()
			got, gn, gok := recycled.Next()
			if got != want || gn != wn || gok != wok || plain.Offset() != recycled.Offset() || plain.Truncated() != recycled.Truncated() {
				t.Fatalf("round %d, line %d: recycled %q %d %v (offset %d), plain %q %d %v (offset %d)",
					round, wn, got, gn, gok, recycled.Offset(), want, wn, wok, plain.Offset())
			}
			if !wok {
				break
			}
			lines++
			window = append(window, held{got, strings.Clone(want), recycled.Chunk()})
			if len(window) > keep {
				window = window[1:]
			}
			for _, h := range window {
				if h.line != h.want {
					t.Fatalf("round %d, line %d: a line still in use reads %q, want %q", round, wn, h.line, h.want)
				}
			}
		}
		if lines == 0 || recycled.Err() != nil {
			t.Fatalf("round %d: %d lines, %v", round, lines, recycled.Err())
		}
		if recycled.reused == 0 {
			t.Fatalf("round %d: no buffer went round: the test checks nothing", round)
		}
	}
}

// TestAppendLinesAsNext reads random text (short and long lines, CRLF,
// empty lines, lines over MaxLine, a last line with or without its
// newline) in batches of random sizes (AppendLines) and line by line
// (Next), plain and through recycled buffers: the same lines, numbers,
// truncations (a batch stops after a truncated line), chunks and offsets
// after each batch.
func TestAppendLinesAsNext(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 4))
	truncated := 0
	for round := range 60 {
		var b bytes.Buffer
		for range 200 + rnd.IntN(400) {
			switch k := rnd.IntN(40); {
			case k == 0 && round%6 == 0:
				b.WriteString(strings.Repeat("x", MaxLine+rnd.IntN(3000)))
			case k < 3:
			case k < 6:
				b.WriteString("#Fields: a b")
			default:
				b.WriteString(strings.Repeat("ab c\r", 40)[:1+rnd.IntN(150)])
			}
			b.WriteString([]string{"\n", "\r\n"}[rnd.IntN(2)])
		}
		if rnd.IntN(2) == 0 {
			b.WriteString("last")
		}
		data := b.Bytes()
		recycle := round%2 == 1
		plain := NewLineReader(&shortReads{data: data, rnd: rand.New(rand.NewPCG(uint64(round), 1))})
		batch := NewLineReader(&shortReads{data: data, rnd: rand.New(rand.NewPCG(uint64(round), 1))})
		if recycle {
			// Every chunk stays in use: the test keeps all the lines.
			plain.RecycleChunks(func() uint64 { return 0 }, 4096)
			batch.RecycleChunks(func() uint64 { return 0 }, 4096)
		}
		var lines []string
		for {
			k := len(lines)
			var first int
			var ok bool
			lines, first, ok = batch.AppendLines(lines, 1+rnd.IntN(40))
			if !ok {
				if len(lines) != k {
					t.Fatalf("round %d: not ok, but %d lines appended", round, len(lines)-k)
				}
				if _, _, more := plain.Next(); more {
					t.Fatalf("round %d: AppendLines ended at line %d, Next goes on", round, k)
				}
				break
			}
			if first != k+1 {
				t.Fatalf("round %d: first %d, want %d", round, first, k+1)
			}
			for j := k; j < len(lines); j++ {
				want, n, more := plain.Next()
				if !more || lines[j] != want || n != j+1 {
					t.Fatalf("round %d: line %d %.40q, Next's %d %.40q (%v)", round, j+1, lines[j], n, want, more)
				}
				if plain.Truncated() {
					truncated++
				}
				if j < len(lines)-1 && plain.Truncated() {
					t.Fatalf("round %d: line %d truncated, but the batch went on", round, n)
				}
			}
			if batch.Truncated() != plain.Truncated() || batch.Chunk() != plain.Chunk() || batch.Offset() != plain.Offset() || batch.Line() != plain.Line() {
				t.Fatalf("round %d, after line %d: truncated %v, chunk %d, offset %d; Next's %v, %d, %d",
					round, len(lines), batch.Truncated(), batch.Chunk(), batch.Offset(), plain.Truncated(), plain.Chunk(), plain.Offset())
			}
		}
		if batch.Err() != nil || plain.Err() != nil {
			t.Fatalf("round %d: %v, %v", round, batch.Err(), plain.Err())
		}
	}
	if truncated < 20 {
		t.Fatalf("%d lines truncated: too few to compare", truncated)
	}
}
