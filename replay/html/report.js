/* The replay report's charts, drawn from the page's own data (the script
   elements "report" and "charts"). No library and no network: plain SVG.
   Text from the logs only ever goes through textContent and setAttribute,
   never through innerHTML. */
(function () {
  'use strict';
  var report = JSON.parse(document.getElementById('report').textContent);
  var charts = JSON.parse(document.getElementById('charts').textContent);
  /* The SVG namespace, taken from an inline svg element of the page. */
  var NS = document.getElementById('svgns').namespaceURI;
  var COLORS = ['#2f6fb3', '#e0702d', '#3a9a4a', '#8e44ad', '#c0392b',
    '#16a085', '#7f6000', '#d35492', '#555e6b', '#1f9bd1'];

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, k)) {
        e.setAttribute(k, String(attrs[k]));
      }
    }
    if (parent) {
      parent.appendChild(e);
    }
    return e;
  }
  function text(parent, x, y, s, cls, anchor) {
    var t = el('text', {x: x, y: y}, parent);
    if (cls) {
      t.setAttribute('class', cls);
    }
    if (anchor) {
      t.setAttribute('text-anchor', anchor);
    }
    t.textContent = s;
    return t;
  }
  function title(parent, s) {
    el('title', {}, parent).textContent = s;
  }
  function short(s, n) {
    return s.length > n ? s.slice(0, n - 1) + '\u2026' : s;
  }
  function fmt(v, unit) {
    if (v === null || v === undefined) {
      return '-';
    }
    if (unit === 'share') {
      return String(Math.round(v * 1000) / 10) + '%';
    }
    if (unit === 'seconds') {
      return v.toFixed(2) + 's';
    }
    return Number.isInteger(v) ? String(v) : String(Math.round(v * 100) / 100);
  }
  /* nice rounds a chart's top up to 1, 2, 4 or 5 times a power of ten, so
     that its four ticks are round numbers. */
  function nice(v) {
    if (!(v > 0)) {
      return 1;
    }
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var ms = [1, 2, 4, 5, 10];
    for (var i = 0; i < ms.length; i++) {
      if (ms[i] * p >= v) {
        return ms[i] * p;
      }
    }
    return 10 * p;
  }
  function stamp(ms) {
    return new Date(ms).toISOString().replace('.000Z', 'Z');
  }

  /* The log's time span: every chart's x axis. */
  var t0 = report.input.first ? Date.parse(report.input.first) : 0;
  var t1 = report.input.last ? Date.parse(report.input.last) : t0;
  if (!(t1 > t0)) {
    t1 = t0 + 1000;
  }

  /* frame draws a chart's axes: a time axis and a value axis from 0 to
     ymax; it returns the functions placing a time and a value. */
  function frame(s, w, h, m, ymax, unit) {
    var x = function (t) {
      return m.l + (Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0) * (w - m.l - m.r);
    };
    var y = function (v) {
      return h - m.b - Math.min(v, ymax) / ymax * (h - m.t - m.b);
    };
    el('line', {'class': 'axis', x1: m.l, y1: h - m.b, x2: w - m.r, y2: h - m.b}, s);
    el('line', {'class': 'axis', x1: m.l, y1: m.t, x2: m.l, y2: h - m.b}, s);
    for (var i = 0; i <= 4; i++) {
      var v = ymax * i / 4;
      if (i > 0) {
        el('line', {'class': 'grid', x1: m.l + 1, y1: y(v), x2: w - m.r, y2: y(v)}, s);
      }
      text(s, m.l - 4, y(v) + 4, fmt(v, unit), 'tick', 'end');
    }
    var span = t1 - t0;
    for (var j = 0; j <= 4; j++) {
      var t = t0 + span * j / 4;
      var label = span > 2 * 86400000 ? stamp(t).slice(5, 16).replace('T', ' ') : stamp(t).slice(11, 19);
      text(s, x(t), h - m.b + 14, label, 'tick', j === 0 ? 'start' : (j === 4 ? 'end' : 'middle'));
    }
    return {x: x, y: y};
  }

  function svg(parent, w, h, cls, attrs) {
    var s = el('svg', {'class': 'chart ' + cls, width: w, height: h, viewBox: '0 0 ' + w + ' ' + h}, parent);
    for (var k in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, k)) {
        s.setAttribute(k, String(attrs[k]));
      }
    }
    return s;
  }

  /* The busiest keys' window values against one limit, over time. */
  function seriesChart(box, rc, li) {
    var lim = rc.limits[li];
    var w = 640, h = 250, m = {l: 56, r: 170, t: 24, b: 28};
    var s = svg(box, w, h, 'series-chart', {'data-rule': rc.rule, 'data-limit': lim.limit});
    var ymax = lim.threshold;
    rc.series.forEach(function (se) {
      se.points.forEach(function (p) {
        if (p[li + 1] !== null && p[li + 1] > ymax) {
          ymax = p[li + 1];
        }
      });
    });
    ymax = nice(ymax * 1.05);
    text(s, m.l, 15, short(lim.limit, 40) + ': busiest keys by ' + rc.by + (lim.lower ? ' (over below the line)' : ''), 'title');
    var f = frame(s, w, h, m, ymax, lim.unit);
    var line = el('line', {'class': 'limit', x1: m.l, x2: w - m.r, y1: f.y(lim.threshold), y2: f.y(lim.threshold)}, s);
    title(line, 'limit ' + lim.limit + ': ' + fmt(lim.threshold, lim.unit));
    var drawn = 0;
    rc.series.forEach(function (se, i) {
      var pts = se.points.filter(function (p) {
        return p[li + 1] !== null;
      });
      if (pts.length === 0) {
        return;
      }
      var color = COLORS[i % COLORS.length];
      var coords = pts.map(function (p) {
        return f.x(p[0]).toFixed(1) + ',' + f.y(p[li + 1]).toFixed(1);
      });
      var poly = el('polyline', {'class': 'series', 'data-key': se.key, 'data-points': pts.length,
        points: coords.join(' '), stroke: color}, s);
      var peak = pts.reduce(function (a, p) {
        return lim.lower ? Math.min(a, p[li + 1]) : Math.max(a, p[li + 1]);
      }, pts[0][li + 1]);
      title(poly, se.key + ': peak ' + fmt(peak, lim.unit) + ' vs ' + lim.limit);
      if (pts.length === 1) {
        el('circle', {cx: coords[0].split(',')[0], cy: coords[0].split(',')[1], r: 2.5, fill: color}, s);
      }
      var ly = m.t + 4 + drawn * 15;
      el('rect', {x: w - m.r + 8, y: ly - 8, width: 10, height: 4, fill: color}, s);
      text(s, w - m.r + 22, ly - 3, short(se.key, 24) + ' ' + fmt(peak, lim.unit), 'legend');
      drawn++;
    });
    if (drawn === 0) {
      text(s, w / 2, h / 2, 'no key charged', 'empty', 'middle');
    }
  }

  function bansOf(rule) {
    return report.decisions.filter(function (d) {
      return d.kind === 'ban' && d.rule === rule;
    });
  }

  /* The requests the rule charged before each of its bans. */
  function beforeChart(box, rule, bans) {
    var after = bans.filter(function (d) {
      return d.after;
    });
    if (after.length === 0) {
      return;
    }
    var w = 640, h = 250, m = {l: 56, r: 20, t: 24, b: 28};
    var s = svg(box, w, h, 'before-chart', {'data-rule': rule, 'data-bans': after.length});
    var ymax = 1;
    after.forEach(function (d) {
      ymax = Math.max(ymax, d.after.requests);
    });
    text(s, m.l, 15, 'requests before each ban: ' + after.length + (after.length === 1 ? ' ban' : ' bans'), 'title caption');
    var f = frame(s, w, h, m, nice(ymax * 1.05), 'requests');
    after.forEach(function (d) {
      var c = el('circle', {'class': 'before', 'data-requests': d.after.requests,
        cx: f.x(Date.parse(d.time)).toFixed(1), cy: f.y(d.after.requests).toFixed(1), r: 3.5}, s);
      title(c, d.key + ': banned ' + d.time + ' after ' + d.after.requests + ' requests (' + d.after.seen + ' seen, ' + d.after.seconds + 's)');
    });
  }

  /* The keys closest to the limits that the rule did not ban. */
  function nearChart(box, rc) {
    if (rc.near.length === 0) {
      return;
    }
    var w = 640, rowh = 18, m = {l: 200, r: 60, t: 26, b: 10};
    var h = m.t + m.b + rowh * rc.near.length;
    var s = svg(box, w, h, 'near-chart', {'data-rule': rc.rule});
    text(s, 8, 15, 'closest to the limits, not banned (peak / limit)', 'title');
    var xmax = 1;
    rc.near.forEach(function (n) {
      xmax = Math.max(xmax, n.ratio);
    });
    xmax *= 1.05;
    var x = function (v) {
      return m.l + v / xmax * (w - m.l - m.r);
    };
    rc.near.forEach(function (n, i) {
      var y = m.t + i * rowh;
      text(s, m.l - 6, y + 12, short(n.key, 30), 'legend', 'end');
      var r = el('rect', {'class': 'near', 'data-key': n.key, 'data-ratio': n.ratio, x: m.l, y: y + 2,
        width: Math.max(1, x(n.ratio) - m.l).toFixed(1), height: rowh - 5}, s);
      title(r, n.key + ': ' + n.ratio + ' of the limit, ' + n.requests + ' requests');
      text(s, x(n.ratio) + 4, y + 12, n.ratio.toFixed(2), 'tick');
    });
    var l = el('line', {'class': 'limit', x1: x(1), x2: x(1), y1: m.t - 4, y2: h - m.b + 4}, s);
    title(l, 'the limit');
  }

  /* Every ban on one timeline, a lane per rule. */
  function timeline(box) {
    var lanes = report.rules.map(function (rr) {
      return {rule: rr.name, bans: bansOf(rr.name)};
    }).filter(function (l) {
      return l.bans.length > 0;
    });
    var w = 1360, lane = 34, m = {l: 170, r: 20, t: 24, b: 28};
    var h = m.t + m.b + lane * Math.max(1, lanes.length);
    var s = svg(box, w, h, 'timeline-chart', {id: 'timeline-svg'});
    text(s, 8, 15, 'bans over log time, a lane per rule', 'title');
    var x = function (t) {
      return m.l + (Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0) * (w - m.l - m.r);
    };
    el('line', {'class': 'axis', x1: m.l, y1: h - m.b, x2: w - m.r, y2: h - m.b}, s);
    for (var j = 0; j <= 6; j++) {
      var t = t0 + (t1 - t0) * j / 6;
      el('line', {'class': 'grid', x1: x(t), y1: m.t, x2: x(t), y2: h - m.b}, s);
      text(s, x(t), h - m.b + 14, stamp(t).slice(0, 19).replace('T', ' '), 'tick', j === 0 ? 'start' : (j === 6 ? 'end' : 'middle'));
    }
    lanes.forEach(function (l, i) {
      var y = m.t + i * lane + lane / 2;
      var label = text(s, m.l - 8, y + 4, short(l.rule, 14) + ': ' + l.bans.length + (l.bans.length === 1 ? ' ban' : ' bans'), 'lane-label', 'end');
      label.setAttribute('data-rule', l.rule);
      label.setAttribute('data-bans', l.bans.length);
      l.bans.forEach(function (d, k) {
        var c = el('circle', {'class': 'ban', 'data-rule': l.rule, cx: x(Date.parse(d.time)).toFixed(1),
          cy: (y + ((k % 5) - 2) * 3).toFixed(1), r: 3}, s);
        title(c, d.key + ' banned ' + d.time + (d.until ? ' until ' + d.until : '') + ': ' + d.reason);
      });
    });
    if (lanes.length === 0) {
      text(s, w / 2, m.t + lane / 2, 'no ban', 'empty', 'middle');
    }
  }

  timeline(document.getElementById('timeline'));
  var byRule = {};
  charts.rules.forEach(function (rc) {
    byRule[rc.rule] = rc;
  });
  Array.prototype.forEach.call(document.querySelectorAll('div.charts[data-rule]'), function (box) {
    var rule = box.getAttribute('data-rule');
    var rc = byRule[rule];
    if (rc && charts.collected) {
      rc.limits.forEach(function (_, li) {
        seriesChart(box, rc, li);
      });
    }
    beforeChart(box, rule, bansOf(rule));
    if (rc) {
      nearChart(box, rc);
    }
  });

  /* The decision table sorts by the column clicked, again to reverse. */
  var table = document.getElementById('decisions');
  Array.prototype.forEach.call(table.querySelectorAll('th.sortable'), function (th, col) {
    th.addEventListener('click', function () {
      var numeric = th.getAttribute('data-type') === 'n';
      var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1;
      th.setAttribute('data-dir', dir === 1 ? 'asc' : 'desc');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (r) {
        var v = r.cells[col].textContent;
        if (!numeric) {
          return v;
        }
        var n = parseFloat(v);
        return isNaN(n) ? -Infinity : n;
      };
      rows.sort(function (a, b) {
        var ka = key(a), kb = key(b);
        return dir * (ka < kb ? -1 : (ka > kb ? 1 : 0));
      });
      rows.forEach(function (r) {
        body.appendChild(r);
      });
    });
  });
  document.body.setAttribute('data-drawn', 'true');
}());
