package parser

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchCases is one representative line per format, shared with the fuzzers.
var benchCases = []struct {
	name string
	opts Options
	line string
}{
	{"common", Options{Format: "common"}, `83.149.9.216 - - [17/May/2015:10:05:03 +0000] "GET /presentations/logstash-monitorama-2013/images/kibana-search.png HTTP/1.1" 200 203023`},
	{"combined", Options{Format: "combined"}, `83.149.9.216 - - [17/May/2015:10:05:03 +0000] "GET /presentations/logstash-monitorama-2013/images/kibana-search.png HTTP/1.1" 200 203023 "http://semicomplete.com/presentations/logstash-monitorama-2013/" "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_9_1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/32.0.1700.77 Safari/537.36"`},
	// Row 2 and 3 of make bench: combined lines of IPv6 clients (scripts/bench-lib.sh's bench_writer).
	{"combined6", Options{Format: "combined"}, `2001:db8:8000:1a2b::1 - - [26/Nov/2026:08:44:00 +0000] "GET /y HTTP/1.1" 200 1 "-" "bench"`},
	{"vhost_combined", Options{Format: "vhost_combined"}, `www.example.com:443 203.0.113.5 - - [22/Nov/2026:07:09:34 +0100] "GET /index.html HTTP/1.1" 200 4523 "https://www.example.com/" "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"`},
	{"host_combined", Options{Format: "host_combined"}, `www.example.com 2001:db8:5::7 - - [22/Nov/2026:07:09:34 +0100] "GET /index.html HTTP/1.1" 200 4523 "-" "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"`},
	{"nginx_timing", Options{Format: "nginx_timing"}, `203.0.113.7 - - [22/Nov/2026:07:09:34 +0100] "GET /search?q=logjail HTTP/2.0" 200 5123 "-" "curl/8.5.0" 0.125`},
	{"apache_timing", Options{Format: "apache_timing"}, `203.0.113.7 - - [22/Nov/2026:07:09:34 +0100] "GET /search?q=logjail HTTP/1.1" 200 5123 "-" "curl/8.5.0" 125034`},
	{"phpfpm", Options{Format: "phpfpm"}, `127.0.0.1 -  22/Nov/2026:07:09:30 +0000 "GET /cpu.php?ms=10" 200 /var/www/cpu.php 10.544 2048 94.84%`},
	{"caddy", Options{Format: "caddy"}, `{"level":"info","ts":1711741864.947103,"logger":"http.log.access.log0","msg":"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"43498","client_ip":"127.0.0.1","proto":"HTTP/1.1","method":"GET","host":"localhost:9080","uri":"/","headers":{"Authorization":[],"User-Agent":["curl/7.88.1"],"Accept":["*/*"]}},"bytes_read":0,"user_id":"Bob","duration":0.794682124,"size":18630,"status":200,"resp_headers":{"Content-Type":["text/html; charset=utf-8"],"Server":["Caddy"]}}`},
	{"traefik_json", Options{Format: "traefik_json"}, `{"ClientAddr":"172.17.0.1:39496","ClientHost":"172.17.0.1","ClientPort":"39496","ClientUsername":"-","DownstreamContentSize":357,"DownstreamStatus":200,"Duration":357313,"OriginContentSize":357,"OriginDuration":324669,"OriginStatus":200,"Overhead":32644,"RequestAddr":"test.docker.localhost","RequestContentSize":0,"RequestCount":190,"RequestHost":"test.docker.localhost","RequestMethod":"GET","RequestPath":"/594VAEoi.save","RequestPort":"-","RequestProtocol":"HTTP/1.1","RequestScheme":"http","RetryAttempts":0,"RouterName":"test@docker","StartLocal":"2021-12-08T14:02:43.587782192Z","StartUTC":"2021-12-08T14:02:43.587782192Z","level":"info","msg":"","time":"2021-12-08T14:02:43Z"}`},
	{"traefik_clf", Options{Format: "traefik_clf"}, `192.168.33.1 - - [02/Oct/2017:20:22:07 +0000] "GET /ui/favicons/favicon-16x16.png HTTP/1.1" 304 0 "http://example.com/login" "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/61.0.3163.100 Safari/537.36" 262 "Host-host-1" "http://172.19.0.3:5601" 2ms`},
	{"haproxy", Options{Format: "haproxy"}, `Nov 22 07:09:34 lb-1 haproxy[4242]: 203.0.113.7:51234 [22/Nov/2026:07:09:34.501] www~ app/web2 12/0/1/230/243 200 5123 - - ---- 3/3/1/1/0 0/0 "GET /search?q=logjail HTTP/1.1"`},
	{"alb", Options{Format: "alb"}, `https 2026-11-22T07:09:34.186641Z app/my-loadbalancer/50dc6c495c0c9188 203.0.113.7:2817 10.0.0.1:80 0.086 0.048 0.037 200 200 0 57 "GET https://www.example.com:443/search?q=logjail HTTP/1.1" "curl/8.5.0" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 "Root=1-58337281-1d84f3d73c47ec4e58577259" "www.example.com" "arn:aws:acm:us-east-2:123456789012:certificate/12345678-1234-1234-1234-123456789012" 1 2026-11-22T07:09:34.014000Z "authenticate,forward" "-" "-" "10.0.0.1:80" "200" "-" "-"`},
	{"cloudfront", Options{Format: "cloudfront"}, "2026-11-22\t07:09:34\tFRA56-P1\t4523\t203.0.113.7\tGET\td111111abcdef8.cloudfront.net\t/index.html\t200\thttps://www.example.com/\tMozilla/5.0%20(X11;%20Linux%20x86_64;%20rv:128.0)%20Gecko/20100101%20Firefox/128.0\t-\t-\tHit\tSOX4xwn4XV6Q4rgb7XiVGOHms_BGlTAC4KyHmureZmBNrjGdRLiNIQ==\twww.example.com\thttps\t412\t0.002\t-\tTLSv1.3\tTLS_AES_128_GCM_SHA256\tHit\tHTTP/2.0\t-\t-\t51755\t0.002\tHit\ttext/html\t4523\t-\t-"},
	{"iis", Options{Format: "iis"}, `2026-11-22 07:09:34 192.0.2.10 GET /search q=logjail&page=2 443 - 203.0.113.7 Mozilla/5.0+(compatible;+Googlebot/2.1;++http://www.google.com/bot.html) - 200 0 0 1234`},
	{"envoy", Options{Format: "envoy"}, `2026-11-22T07:09:34.123456789+01:00 stdout F [2026-11-22T06:09:34.123Z] "GET /search?q=logjail HTTP/1.1" 200 - 0 5123 125 120 "203.0.113.7" "curl/8.5.0" "5e3b1c1e-6a57-4d2e-9f0e-0c5b4b5c1a01" "www.example.com" "10.0.0.5:8080"`},
	{"envoy_json", Options{Format: "envoy"}, `{":authority":"www.example.com","bytes_received":0,"bytes_sent":5123,"downstream_local_address":"192.0.2.10:10443","downstream_remote_address":"203.0.113.7:59292","duration":125,"method":"GET","protocol":"HTTP/2","response_code":200,"response_flags":"-","start_time":"2026-11-22T06:09:34.123Z","upstream_host":"10.0.0.5:8080","user-agent":"curl/8.5.0","x-envoy-origin-path":"/search?q=logjail","x-forwarded-for":"203.0.113.7","x-request-id":"5e3b1c1e-6a57-4d2e-9f0e-0c5b4b5c1a01"}`},
	{"log_format", Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time`, CPUField: "upstream_http_x_cpu_time"}, `198.51.100.23 - alice [22/Nov/2026:07:09:34 +0100] "POST /export?all=1 HTTP/1.1" 200 90211 "https://example.com/" "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0" rt=1.250 cpu=0.870`},
	{"apache_format", Options{ApacheFormat: `%v %h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %D`}, `www.example.com 198.51.100.23 - - [22/Nov/2026:07:09:34 +0100] "GET /index.html HTTP/1.1" 200 4523 "-" "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0" 1534`},
	{"fpm_format", Options{FPMFormat: `%{REMOTE_ADDR}e - %u [%t] "%m %r%Q%q" %s %{mili}d %{kilo}M %C%% %{%Y-%m-%dT%H:%M:%S%z}T`}, `203.0.113.10 -  [22/Nov/2026:12:39:37 +0530] "GET /cpu.php?ms=100" 200 101.625 2048 78.72% 2026-11-22T12:39:37+0530`},
	{"json", Options{JSONFields: map[string]string{"ip": "remote", "time": "ts", "method": "req.method", "path": "req.uri", "status": "status", "duration": "took"}}, `{"ts":"2026-11-22T07:09:34.123+01:00","remote":"2001:db8::7","req":{"method":"GET","uri":"/a/b?c=d","headers":{"accept":"*/*"}},"status":404,"took":0.002}`},
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range benchCases {
		p, err := New(bc.opts)
		if err != nil {
			b.Fatal(err)
		}
		line := []byte(bc.line)
		if _, err := p.Parse(line, 1); err != nil {
			b.Fatalf("%s: %v", bc.name, err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, err := p.Parse(line, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// BenchmarkParseString is the zero-copy path: no allocation for plain lines
// (combined6 is row 2's line of make bench, an IPv6 client; log_format is
// testdata/genlog.yaml's, with a named CPU field: its
// Entry.Fields is the one allocation a line may cost); buf=reused is
// ParseStringBuf into one buffer of 512 lines' room, reused as replay's
// blocks do, which allocates nothing; to=block is ParseStringTo into the
// entries of a block, as replay's workers parse since issue 23's part RP.
func BenchmarkParseString(b *testing.B) {
	for _, name := range []string{"combined", "combined6", "nginx_timing", "log_format"} {
		for _, bc := range benchCases {
			if bc.name != name {
				continue
			}
			p, err := New(bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(bc.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(bc.line)))
				for b.Loop() {
					if _, err := p.ParseString(bc.line, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(bc.name+"/buf=reused", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(bc.line)))
				buf := make([]Field, 0, 512*p.FieldsPerLine())
				var err error
				for b.Loop() {
					if cap(buf)-len(buf) < p.FieldsPerLine() {
						buf = buf[:0]
					}
					if _, buf, err = p.ParseStringBuf(bc.line, 1, buf); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(bc.name+"/to=block", func(b *testing.B) {
				// ParseStringTo into the entries of a block of 512, as
				// replay's workers parse: no Entry copied.
				b.ReportAllocs()
				b.SetBytes(int64(len(bc.line)))
				buf := make([]Field, 0, 512*p.FieldsPerLine())
				entries := make([]Entry, 512)
				var err error
				i := 0
				for b.Loop() {
					if cap(buf)-len(buf) < p.FieldsPerLine() {
						buf = buf[:0]
					}
					if buf, err = p.ParseStringTo(bc.line, 1, buf, &entries[i%len(entries)]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// genLines are n lines like testdata/genlog.yaml's log (../shared/tools/genlog.py's
// combined_cpu: a tenth of the clients IPv6, a hundred lines a second, the
// referer "-" half the time) or, with row2, like row 2's of make bench
// (scripts/bench-lib.sh's bench_writer: IPv6 clients, 2,500 lines a second).
func genLines(n int, row2 bool) []string {
	r := rand.New(rand.NewPCG(7, 23))
	uas := []string{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1.1 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"}
	paths := []string{"/", "/images/logo.svg", "/api/v1/items?page=3&limit=20", "/blog/", "/login", "/search?q=issel"}
	t0 := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	out := make([]string, n)
	for i := range out {
		if row2 {
			c := r.IntN(200000)
			ts := t0.Add(time.Duration(i/2500) * time.Second).Format("02/Jan/2006:15:04:05 -0700")
			out[i] = fmt.Sprintf(`2001:db8:%x:%x::1 - - [%s] "GET /y HTTP/1.1" 200 1 "-" "bench"`, 0x8000+c/65536, c%65536, ts)
			continue
		}
		ip := fmt.Sprintf("%d.%d.%d.%d", 1+r.IntN(223), r.IntN(256), r.IntN(256), 1+r.IntN(254))
		if r.IntN(10) == 0 {
			ip = fmt.Sprintf("2a01:%x:%x:%x:%x:%x:%x:%x", r.IntN(65536), r.IntN(65536), r.IntN(65536), r.IntN(65536), r.IntN(65536), r.IntN(65536), r.IntN(65536))
		}
		ref := "-"
		if r.IntN(2) == 0 {
			ref = fmt.Sprintf("https://www.example.com/products/%d-toze", r.IntN(100000))
		}
		out[i] = fmt.Sprintf(`%s - - [%s] "GET %s HTTP/%s" %d %d "%s" "%s" rt=0.%03d cpu=0.%03d`, ip,
			t0.Add(time.Duration(i/100)*time.Second).Format("02/Jan/2006:15:04:05 -0700"), paths[r.IntN(len(paths))],
			[]string{"1.1", "2.0"}[r.IntN(2)], []int{200, 200, 200, 304, 404}[r.IntN(5)], r.IntN(200000), ref, uas[r.IntN(len(uas))], r.IntN(200), r.IntN(100))
	}
	return out
}

// BenchmarkParseLines is ParseStringTo into the entries of a block, as
// replay's workers parse, over 8,192 different lines (genLines: genlog is
// testdata/genlog.yaml's format, row2 the combined preset on row 2's
// lines), whose lengths, addresses and numbers vary as a log's do, unlike
// BenchmarkParseString's one line.
func BenchmarkParseLines(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
		row2 bool
	}{
		{"genlog", Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time`,
			CPUField: "upstream_http_x_cpu_time", Location: time.UTC}, false},
		{"row2", Options{Format: "combined"}, true},
	} {
		lines := genLines(8192, bc.row2)
		p, err := New(bc.opts)
		if err != nil {
			b.Fatal(err)
		}
		size := 0
		for _, l := range lines {
			if _, err := p.ParseString(l, 1); err != nil {
				b.Fatalf("%s: %v", bc.name, err)
			}
			size += len(l)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size / len(lines)))
			buf := make([]Field, 0, 512*p.FieldsPerLine())
			entries := make([]Entry, 512)
			var err error
			i := 0
			for b.Loop() {
				if cap(buf)-len(buf) < p.FieldsPerLine() {
					buf = buf[:0]
				}
				if buf, err = p.ParseStringTo(lines[i%len(lines)], 1, buf, &entries[i%len(entries)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
