// Package signatures is logjail's signature rules: requests no legitimate
// client makes, whatever the status the site answered — a /.env, a
// /.git/config, a phpunit eval-stdin.php, a ${jndi: in the user agent, a
// ../../etc/passwd, a ;wget http://… in the request line. A rule that
// names families (`signatures: [secrets, vcs]`, package rules) matches an
// entry only when one of their patterns does.
//
// # Families
//
// Built in, one file each under families/ (embedded with go:embed),
// written here from public knowledge of the probes and exploits:
//
//   - secrets: credentials, keys, dumps and editor or shell dotfiles
//     (/.env and its variants, /.aws/credentials, wp-config.php and its
//     backups, /.htpasswd, id_rsa, /.ssh/, config backups, /backup.sql,
//     /.DS_Store, /.vscode/sftp.json);
//   - vcs: /.git/, /.svn/, /.hg/, /.bzr/, CVS;
//   - exploits: vulnerable endpoints and payloads (phpunit eval-stdin.php,
//     /boaform/, /HNAP1, ThinkPHP, Solr and actuator APIs, router CGIs,
//     WebLogic, Cisco/F5/Fortinet/Pulse gateways, Log4Shell and other
//     ${...} interpolation in the request line, user agent or referer,
//     OGNL, Shellshock, PHP-CGI arguments, known web shells, remote file
//     inclusion);
//   - traversal: ../ and its encodings in the path, two levels in the
//     query, /etc/passwd, /proc/self/environ, win.ini;
//   - shells: commands in the request line after a shell separator (;wget,
//     |sh, $(id)), chmod +x, cd /tmp, busybox, ${IFS}, /dev/tcp;
//   - panels: admin pages of software a site may not run (wp-login.php,
//     /wp-admin/, xmlrpc.php, phpMyAdmin's spellings, Adminer, Tomcat's
//     manager, Joomla's /administrator/): for a rule that counts only 4xx
//     answers; a WordPress site leaves this family out.
//
// Decisions where a probe and a visitor look alike: /docker-compose.yml,
// /config.json, /phpinfo.php and every .sql file are not signatures (some
// sites publish them; web apps fetch their own SQL migrations); a "../"
// counts anywhere in the path (clients resolve it before sending) but
// only two levels deep in the query; ${...} counts only as a lookup
// (${jndi:, ${env:, ${lower:, ${::-, ${${) since a broken single-page app
// sends /api/items/${itemId} and /api/${env}/items; a shell command counts only after a shell
// separator or in a shell construct, so a search for "wget http" does
// not.
//
// # File format
//
// A family file is YAML:
//
//	family: NAME                # lower-case letters, digits, '_', '-'
//	patterns:
//	  - name: dotenv            # unique in the file
//	    fields: [path]          # path | query | request | user_agent | referer
//	    pattern: '(?i)/\.env$'  # RE2, unanchored; (?i) where case does not matter
//	    literal: ['/.env']      # optional: see below
//	    match: ['198.51.100.7 - - [25/Nov/2026:10:00:00 +0000] "GET /.env HTTP/1.1" 404 153 "-" "curl/8.5.0"']
//	    clean: [/environment/]  # request targets, or full combined lines
//
// `request` is the request line without the protocol ("GET /a?b=c"), or
// the request as logged when no method could be read from it (a bare
// "${jndi:...}"). `match` are full combined log lines the pattern must
// match (read by the real parser); `clean` are real, legitimate URLs
// that look close and must not match. TestFamilies checks both for every
// pattern, and a user's family file (rules' `file:PATH`) is checked the
// same way when the configuration loads (package rules runs Check).
//
// To add a family: write families/NAME.yaml, and it is built in (Builtin
// lists the directory); name it in rules/example.yaml's comment.
//
// # The matcher
//
// A rule with signatures runs on every line of a replay, so Set.First
// does not run one big regular expression over every path. Every
// pattern has required literals: one of them is in every match, ignoring
// ASCII case. They are extracted from the RE2 syntax tree (Required: the
// longest run of literal parts of a concatenation, the union over an
// alternation's branches; at least MinLiteral bytes) or declared with
// `literal:` where the tree yields none (a short or repeated prefix). All
// literals of a set go into one Aho–Corasick automaton over lower-cased
// bytes, built into a full transition table over byte classes (bytes in
// no literal share class 0), so a line costs one table load per byte of
// the request line (and of the user agent and referer when a pattern
// looks at them) and no allocation. A pattern's regular expression runs
// only when one of its literals is found in one of its fields, at most
// once per entry.
//
// Set.First gives the first pattern (in family, then file order) that an
// entry matches; rules.Charge.Signature carries its Pattern.ID
// ("family/name") and the detector names it in the reason of the ban it
// causes: `rate 1 per 14d > 0, signature secrets/dotenv (rule probes)`.
// When one client sends two probes in the same second, the reason names
// the one read first; replay merges files by time, and the order of one
// second's lines from two files is not defined, so that name (not the ban)
// may differ with the order of the files.
//
// A *Set is immutable and safe for concurrent use. The package has no
// state of its own.
//
// Boundaries: It owns the signature families and their matcher. It must not
// read files or the clock, nor decide what a match costs: a rule's limits do
// (rules, detector).
package signatures
