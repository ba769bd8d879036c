#!/usr/bin/env python3
"""clients.py - list each client of an access log, for labelling by hand.

Usage:
  clients.py --draft NAME LOG...    a draft of labels/NAME.yaml by the criteria of
                                    README.md (see draft below), to review
  clients.py LOG...                 every client, busiest first: requests, span,
                                    statuses, user agents, peak per second and
                                    per 10 s, and the suspicious requests it sent
  clients.py --client ADDR LOG...   every request of one client, in order

It reads combined and common lines (Apache, nginx); it decides nothing: the
labels in labels/*.yaml are written by a person reading its output (see
README.md for the criteria). Suspicious requests are flagged by the same
public knowledge the labelling criteria name (secrets, VCS, panels, exploit
payloads), to point the reader at them, not to label.
"""
import argparse
import collections
import datetime
import re
import signal

signal.signal(signal.SIGPIPE, signal.SIG_DFL)

LINE = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "((?:[^"\\]|\\.)*)" (\d{3}) (\S+)(?: "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)")?')
SUSPICIOUS = re.compile(
    r'(/\.env|/\.git|/\.svn|/\.aws|/\.ht|wp-login|wp-admin|xmlrpc|wp-config|phpmyadmin|/pma|myadmin|'
    r'eval-stdin|/cgi-bin/|cmd\.exe|root\.exe|/scripts/\.\.|/_vti|/msadc|/iisadmin|default\.ida|'
    r'\.\./|%2e%2e|/etc/passwd|\$\{jndi|wget |curl |/boaform|/HNAP1|/administrator|fckeditor|/user/register|'
    r'/manager/html|/console|/solr|/actuator|/vendor/|owa/|/sumthin|/w00t|/mstshash|\\x|CONNECT |'
    r'SEARCH |PROPFIND|OPTIONS )', re.I)


def parse_time(s):
    return datetime.datetime.strptime(s, '%d/%b/%Y:%H:%M:%S %z')


def read(paths):
    for p in paths:
        with open(p, encoding='utf-8', errors='replace') as f:
            for n, line in enumerate(f, 1):
                m = LINE.match(line)
                if not m:
                    continue
                ip, ts, req, st, _, ref, ua = m.groups()
                yield p, n, ip, parse_time(ts), req, int(st), ua or ''


def peak(times, width):
    best, j = 0, 0
    for i, t in enumerate(times):
        while (t - times[j]).total_seconds() >= width:
            j += 1
        best = max(best, i - j + 1)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--client')
    ap.add_argument('--min', type=int, default=1, help='list clients with at least this many requests or one suspicious one')
    ap.add_argument('--draft')
    ap.add_argument('--honeypot', action='store_true', help='a honeypot has no users: busy clients are not good by volume')
    ap.add_argument('logs', nargs='+')
    a = ap.parse_args()
    if a.client:
        for p, n, ip, t, req, st, ua in read(a.logs):
            if ip == a.client:
                print(f'{t.isoformat()} {st} {req[:160]!r} {ua[:60]!r}')
        return
    by = collections.defaultdict(list)
    for r in read(a.logs):
        by[r[2]].append(r)
    if a.draft:
        draft(a.draft, by, a.honeypot)
        return
    for ip, rs in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rs.sort(key=lambda r: r[3])
        sus = [r for r in rs if SUSPICIOUS.search(r[4])]
        if len(rs) < a.min and not sus:
            continue
        times = [r[3] for r in rs]
        st = collections.Counter(r[5] for r in rs)
        uas = collections.Counter(r[6][:70] for r in rs)
        span = (times[-1] - times[0]).total_seconds()
        print(f'{ip} n={len(rs)} span={span:.0f}s p1s={peak(times, 1)} p10s={peak(times, 10)} '
              f'status={dict(st.most_common(4))} ua={[u for u, _ in uas.most_common(2)]}')
        for r in sus[:6]:
            print(f'    ! {r[5]} {r[4][:110]!r}')
        if not sus:
            paths = collections.Counter(r[4].split(' ')[1] if ' ' in r[4] else r[4] for r in rs)
            print('      ' + ' '.join(p[:50] for p, _ in paths.most_common(4)))


# SIGNATURE: requests no legitimate client of these sites makes, whatever the
# status (README.md, "attacker"). Narrower than SUSPICIOUS: a real directory
# called /scripts/ or an article about WordPress is no probe.
SIGNATURE = re.compile(
    r'(/\.env|/\.git/|/\.svn/|/\.aws/|/\.ht(access|passwd)|wp-config|eval-stdin|/vendor/phpunit|'
    r'cmd\.exe|root\.exe|default\.ida|nsiislog\.dll|/_vti_bin/|/msadc/|/_mem_bin/|/c%24|/admin%24|'
    r'/sumthin|w00t|\$\{jndi|wget\s+http|curl\s+http|/boaform|/HNAP1|fgt_lang|/actuator/|XDEBUG_SESSION|'
    r'/etc/passwd|\.\.%2f|\.\.%5c|\.\.%255c|\.\.%c0|\.\.%c1|/\.\./|wp-login\.php|/wp-admin|xmlrpc\.php|'
    r'[?&]author=\d|/administrator/|fckeditor|phpmyadmin|/pma/|myadmin|/manager/html|/solr/|/owa/|'
    r'/user/register|/ecp/|/cgi-bin/|muieblackcat|/muie|%u9090|^PUT /scripts/|/wp-content/(plugins|themes)/[^ ?]*\.php|/system_api\.php|/streaming/clients_live\.php|'
    r'wlwmanifest\.xml|/(backup|site|public_html|wordpress|www|web|db|database|htdocs)\.(zip|rar|7z|tar|tar\.gz|tgz|sql)\b)', re.I)
# HEADER_SIGNATURE: the same in the user agent or the referer (Log4Shell).
HEADER_SIGNATURE = re.compile(r'\$\{jndi|\$\{\$\{|\(\) \{ :;\};', re.I)
BOT = re.compile(r'(googlebot|bingbot|msnbot|slurp|yandex|baiduspider|ahrefsbot|mj12bot|dotbot|petalbot|'
                 r'semrushbot|exabot|archive\.org|applebot|duckduckbot|barkrowler|feedfetcher|feedparser|'
                 r'tiny tiny rss|feedly|rss|let\'s encrypt|uptimerobot|pingdom|ezooms|bot\b|crawler|spider)', re.I)
# PROBE_LINE: request lines no web client sends: WebDAV overflows, proxy
# requests (absolute or host:port targets), other protocols spoken to the
# web port (nginx writes their bytes as \xHH: RDP's mstshash, TLS, Gh0st),
# mining-pool JSON-RPC, win.ini traversal.
PROBE_LINE = re.compile(r'^(SEARCH|PROPFIND|CONNECT) |^[A-Z]+ (https?://|[a-z0-9.-]+:\d+)|\\x[0-9A-F]{2}\\x[0-9A-F]{2}|'
                        r'mstshash|Gh0st|mining\.(subscribe|authorize)|eth_submitLogin|\\x22method\\x22|win\.ini', re.I)


GOOGLE = tuple(f'66.249.{i}.' for i in range(64, 96))
# The published ranges of verified crawlers (Googlebot, Bingbot): a crawler
# UA from them is the crawler, whatever links it follows.
VERIFIED = GOOGLE + ('40.77.167.', '207.46.13.', '157.55.39.')


# OVERRIDES are the reviewer's decisions where the criteria above are
# wrong for a client: (label, why), or (None, why) to leave it unlabelled.
OVERRIDES = {
    'elastic-apache_logs.log': {
        '128.118.108.67': ('good', 'a Mac app (CFNetwork) fetching /favicon.ico 32 times in 26 h, all 200'),
        '208.91.156.11': ('good', 'Chef Client fetching one moved file (/files/logstash/logstash-1.3.2-monolithic.jar, 404) 60 times in 3 days: automation, no probe'),
    },
    'ployt0-nginx-bots-access.log': {
        '20.228.231.0': (None, 'WordPress/6.0.2 pingback-like HEADs on articles and an ACME path: neither a probe nor a known good client'),
    },
}


def draft(name, by, honeypot):
    """Prints a draft of labels/NAME.yaml: attackers by SIGNATURE, proxy
    probes, one request hammered without a user agent (20+ in 10 s), or a 404 walk (20+ requests, 80%+ 4xx, 10+ distinct paths);
    good: crawlers, feed readers and monitors by user agent without any
    signature, and the busiest clients (40+ requests or 15+ in 10 s) that
    are mostly 2xx/3xx. The rest stays unlabelled. A person reviews it."""
    out = []
    for ip, rs in by.items():
        rs.sort(key=lambda r: r[3])
        n = len(rs)
        span = (rs[-1][3] - rs[0][3]).total_seconds()
        sig = [r for r in rs if SIGNATURE.search(r[4]) or PROBE_LINE.search(r[4]) or HEADER_SIGNATURE.search(r[6] or '')]
        c4 = sum(1 for r in rs if 400 <= r[5] < 500)
        paths4 = {r[4] for r in rs if 400 <= r[5] < 500}
        uas = collections.Counter(r[6] for r in rs)
        ua = uas.most_common(1)[0][0]
        botua = next((u for u in uas if BOT.search(u)), '')
        verified = ip.startswith(VERIFIED) and botua
        if sig and not verified:
            seen, ex = set(), []
            for r in sig:
                q = r[4].split(' ')
                p = (q[0] + ' ' + q[1] if len(q) > 1 else r[4])
                p = re.sub(r'[^\x21-\x7e ]', '?', p)
                m = SIGNATURE.search(p) or PROBE_LINE.search(p)
                if not m and HEADER_SIGNATURE.search(r[6] or ''):
                    p += ' with user agent ' + clean(r[6])[:30]
                if len(p) > 60 and m and m.start() > 30:
                    p = p[:20] + '...' + p[m.start() - 5:m.start() + 30] + '...'
                elif len(p) > 60:
                    p = p[:57] + '...'
                if p in seen:
                    continue
                seen.add(p)
                ex.append(f'{p} ({r[5]})')
                if len(ex) == 3:
                    break
            out.append((ip, 'attacker', f'{", ".join(ex)}; {len(sig)} of {n} requests such in {fmt(span)}'))
        elif (p10 := peak([r[3] for r in rs], 10)) >= 20 and len({r[4] for r in rs}) == 1 and ua in ('-', ''):
            out.append((ip, 'attacker', f'hammers one request ({clean(rs[0][4])[:40]}) without a user agent: {n} times, up to {p10} in 10 s'))
        elif n >= 20 and c4 >= 0.8 * n and len(paths4) >= 10 and not botua:
            out.append((ip, 'attacker', f'walks 404s: {c4} of {n} requests 4xx on {len(paths4)} paths in {fmt(span)}'))
        elif botua and re.search('googlebot', botua, re.I) and not ip.startswith(GOOGLE):
            continue  # claims Googlebot outside 66.249.64.0/19: not verified, not good
        elif verified:
            out.append((ip, 'good', f'{BOT.search(botua).group(0)} user agent from its published range: {n} requests, {c4} 4xx, in {fmt(span)}' + (f', {len(sig)} on links such as {sig[0][4].split(" ")[1][:40]}' if sig else '')))
        elif botua:
            out.append((ip, 'good', f'{BOT.search(botua).group(0)} user agent, no probe: {n} requests, {c4} 4xx, in {fmt(span)}'))
        elif not honeypot and (n >= 15 or peak([r[3] for r in rs], 10) >= 10) and c4 < 0.5 * n:
            feeds = all(re.search(r'rss|atom|feed', r[4], re.I) for r in rs)
            if ua.startswith('Mozilla/'):
                kind = 'browser'
            elif feeds:
                kind = 'feed reader ' + repr(clean(ua)[:30])
            else:
                continue  # a busy tool that is no browser nor feed reader: unlabelled
            out.append((ip, 'good', f'{kind}, no probe: {n} requests, {n - c4} 2xx/3xx, up to {peak([r[3] for r in rs], 10)} in 10 s, over {fmt(span)}'))
    over = OVERRIDES.get(name, {})
    out = [o for o in out if o[0] not in over]
    out += [(ip, label, why) for ip, (label, why) in over.items() if label]
    print(f'# Labels of {name}: drafted by clients.py --draft, reviewed by hand (README.md).')
    print('clients:')
    for ip, label, why in sorted(out, key=lambda x: (x[1], x[0])):
        why = why.replace("'", "''")
        print(f"  - {{addr: {ip}, label: {label}, why: '{why}'}}")


def clean(s):
    return re.sub(r'[^\x20-\x7e]', '?', s) or '-'


def fmt(sec):
    if sec < 120:
        return f'{sec:.0f} s'
    if sec < 7200:
        return f'{sec / 60:.0f} min'
    if sec < 172800:
        return f'{sec / 3600:.0f} h'
    return f'{sec / 86400:.0f} days'


if __name__ == '__main__':
    main()
