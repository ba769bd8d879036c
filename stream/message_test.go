package stream_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/stream"
)

const accessLine = `198.51.100.7 - - [25/Nov/2026:18:30:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.5"`

var messageTests = []struct {
	name string
	in   string
	want stream.Message // Text as a string in text
	text string
	err  bool
}{
	// RFC 3164, as nginx writes it (ngx_syslog_add_header: "<%d>%s %V %V: ").
	{name: "nginx", in: "<190>Nov 25 18:30:00 web1 nginx: " + accessLine,
		want: stream.Message{Priority: 190, Hostname: "web1", Tag: "nginx"}, text: accessLine},
	{name: "nginx nohostname", in: "<190>Nov  5 08:03:09 nginx: " + accessLine,
		want: stream.Message{Priority: 190, Tag: "nginx"}, text: accessLine},
	{name: "syslog(3) with pid", in: "<13>Jan  1 00:00:00 myapp[1234]: hello world\n",
		want: stream.Message{Priority: 13, Tag: "myapp"}, text: "hello world"},
	{name: "3164 empty message", in: "<13>Jan  1 00:00:00 host app:",
		want: stream.Message{Priority: 13, Hostname: "host", Tag: "app"}, text: ""},
	{name: "pri 0", in: "<0>Dec 31 23:59:59 h t: x", want: stream.Message{Hostname: "h", Tag: "t"}, text: "x"},
	// RFC 5424 (its section 6.5 examples, and what rsyslog forwards).
	{name: "5424 no SD", in: "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - 'su root' failed",
		want: stream.Message{Priority: 34, RFC5424: true, Hostname: "mymachine.example.com", Tag: "su"}, text: "'su root' failed"},
	{name: "5424 BOM", in: "<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710 - - \xef\xbb\xbf" + accessLine,
		want: stream.Message{Priority: 165, RFC5424: true, Hostname: "192.0.2.1", Tag: "myproc"}, text: accessLine},
	{name: "5424 SD", in: `<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"] An application event`,
		want: stream.Message{Priority: 165, RFC5424: true, Hostname: "mymachine.example.com", Tag: "evntslog"}, text: "An application event"},
	{name: "5424 two SD, escapes", in: `<165>1 - - nginx - - [a x="q\"]"][b y="\\"] ` + accessLine,
		want: stream.Message{Priority: 165, RFC5424: true, Tag: "nginx"}, text: accessLine},
	{name: "5424 SD only", in: `<165>1 2003-10-11T22:14:15.003Z host app - - [id@1 a="b"]`,
		want: stream.Message{Priority: 165, RFC5424: true, Hostname: "host", Tag: "app"}, text: ""},
	{name: "5424 nil everything", in: "<14>1 - - - - - -", want: stream.Message{Priority: 14, RFC5424: true}, text: ""},
	// Malformed.
	{name: "empty", in: "", err: true},
	{name: "no pri", in: "Nov 25 18:30:00 web1 nginx: x", err: true},
	{name: "pri too big", in: "<192>Nov 25 18:30:00 web1 nginx: x", err: true},
	{name: "pri leading zero", in: "<01>Nov 25 18:30:00 web1 nginx: x", err: true},
	{name: "pri unterminated", in: "<1900 x", err: true},
	{name: "3164 bad month", in: "<13>Foo 25 18:30:00 web1 nginx: x", err: true},
	{name: "3164 short", in: "<13>Nov 25", err: true},
	{name: "3164 no tag", in: "<13>Nov 25 18:30:00 web1 nginx x", err: true},
	{name: "5424 too few", in: "<13>1 2003-10-11T22:14:15.003Z host app", err: true},
	{name: "5424 bad SD", in: "<13>1 2003-10-11T22:14:15.003Z host app - - x msg", err: true},
	{name: "5424 unterminated SD", in: `<13>1 - host app - - [id a="]`, err: true},
	{name: "5424 no space before MSG", in: `<13>1 - host app - - [id a="b"]msg`, err: true},
}

func TestParseMessage(t *testing.T) {
	for _, tt := range messageTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stream.ParseMessage([]byte(tt.in))
			if tt.err {
				if !errors.Is(err, stream.ErrMalformed) {
					t.Fatalf("ParseMessage(%q) = %+v, %v; want ErrMalformed", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMessage(%q): %v", tt.in, err)
			}
			if string(got.Text) != tt.text {
				t.Errorf("text %q, want %q", got.Text, tt.text)
			}
			got.Text = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseMessage: ParseMessage never panics, and what it accepts is
// sane: a priority of 0–191, a tag without spaces, a text that is a piece
// of the datagram.
func FuzzParseMessage(f *testing.F) {
	for _, tt := range messageTests {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		m, err := stream.ParseMessage(b)
		if !bytes.Equal(in, b) {
			t.Fatalf("ParseMessage changed its input")
		}
		if err != nil {
			if !errors.Is(err, stream.ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if m.Priority < 0 || m.Priority > 191 {
			t.Errorf("priority %d", m.Priority)
		}
		if bytes.ContainsAny([]byte(m.Tag), " \x00") || bytes.ContainsAny([]byte(m.Hostname), " ") {
			t.Errorf("tag %q, host %q hold a space", m.Tag, m.Hostname)
		}
		if len(m.Text) > 0 && !bytes.Contains(b, m.Text) {
			t.Errorf("text %q is not in the datagram", m.Text)
		}
	})
}

func BenchmarkParseMessage(b *testing.B) {
	d := []byte("<190>Nov 25 18:30:00 web1 nginx: " + accessLine)
	b.ReportAllocs()
	b.SetBytes(int64(len(d)))
	for b.Loop() {
		if _, err := stream.ParseMessage(d); err != nil {
			b.Fatal(err)
		}
	}
}
