#!/usr/bin/env python3
"""Writes the input logs of testdata/scenarios (run from anywhere; deterministic)."""
import os, datetime as dt
root=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'testdata', 'scenarios')
T0=dt.datetime(2026,11,2,10,0,0,tzinfo=dt.timezone.utc)
def clf(ip, t, path='/', status=200, user='-', rt=None, cpu=None):
    s=f'{ip} - {user} [{t.strftime("%d/%b/%Y:%H:%M:%S +0000")}] "GET {path} HTTP/1.1" {status} 100 "-" "test-agent"'
    if rt is not None: s+=f' {rt:.3f} {cpu:.3f}'
    return s
def write(name, fname, lines):
    d=os.path.join(root,name); os.makedirs(d,exist_ok=True)
    open(os.path.join(d,fname),'w').write('\n'.join(lines)+'\n')
S=lambda s: T0+dt.timedelta(seconds=s)

# 1 stonehenge cpu
L=[]
for s in range(0,46):
    L.append(clf('203.0.113.10',S(s),'/photos/x.jpg',rt=0.1,cpu=0.08))
    L.append(clf('203.0.113.11',S(s),'/photos/y.jpg',rt=0.1,cpu=0.01))
write('stonehenge-cpu','access.log',L)

# 2 perlbal ladder
ev=[]
for s in [0,1,2,3,4,5,6,7,8]+list(range(9,21)): ev.append((s,'203.0.113.20'))
for s in [70,71,72,73,74,75,76,77,78]: ev.append((s,'203.0.113.20'))
for s in [200,201,202,203,204,205,206,207,208]: ev.append((s,'203.0.113.20'))
for s in [0,1,2,3,4,5,6,20,21,22,23,24,25]: ev.append((s,'203.0.113.21'))
ev.sort(key=lambda e:(e[0],e[1]))
write('perlbal-ladder','access.log',[clf(ip,S(s)) for s,ip in ev])

# 3 adaptive any/all
ev=[]
for s in [0,1,2,3]: ev.append((s,'203.0.113.30','bob'))
carol=[0,1,2,3,30,31,32,33]
for i,s in enumerate(carol): ev.append((s,'198.51.100.%d'%(1+i%4),'carol'))
ev.sort()
write('adaptive-any-all','access.log',[clf(ip,S(s),'/login',user=u) for s,ip,u in ev])

# 4 cerberus ranges
ev=[]
for i in range(5):
    for k in range(3): ev.append((i*3+k,'198.51.100.%d'%(1+i)))
for k in range(20): ev.append((k*0.5,'198.51.100.200'))
ev.append((1,'203.0.113.70'))
for k in range(6): ev.append((k,'203.0.113.5'))
for day in range(21): ev.append((day*86400+3600,'203.0.113.%d'%(130+day%3)))
ev.sort()
write('cerberus-ranges','access.log',[clf(ip,S(int(s))) for s,ip in ev])

# 5 apache last N within
def msec(ip,t): return f'{ip} [{t:.3f}] "GET / HTTP/1.1" 200'
base=T0.timestamp()+100
ev=[(base+0.4*k,'203.0.113.50') for k in range(5)]+[(base+0.5*k,'203.0.113.51') for k in range(5)]
ev.sort()
write('apache-last-n','access.log',[msec(ip,t) for t,ip in ev])

# 7 ipv6 /64
ev=[(k,'2001:db8:1:2::%x'%(k+1)) for k in range(6)]+[(k,'2001:db8:1:3::1') for k in range(3)]
ev.sort()
write('ipv6-prefix','access.log',[clf(ip,S(s)) for s,ip in ev])

# 8 allow over deny, host never banned
ev=[]
for k in range(10):
    ev += [(k,'203.0.113.40'),(k,'203.0.113.250'),(k,'203.0.113.42')]
ev.append((0,'203.0.113.41'))
ev.sort()
write('allow-deny-host','access.log',[clf(ip,S(s)) for s,ip in ev])

# 10 circuit breaker
ev=[]
for i in range(5):
    for k in range(3): ev.append((i*5+k,'198.51.100.%d'%(10+i)))
ev.sort()
write('circuit-breaker','access.log',[clf(ip,S(s)) for s,ip in ev])

# 11 out-of-order lines within and beyond skew (one file, as a server writes
# it: a slow request is logged with its start time, after faster ones)
L=[]
for s in [10,11,12,9,13]: L.append(clf('203.0.113.60',S(s)))   # :09 is 3s late: within skew
for s in [30,31,32,20,33]: L.append(clf('203.0.113.61',S(s)))  # :20 is 12s late: beyond skew
for s in [50,51,52,53,40]: L.append(clf('203.0.113.62',S(s)))  # :40 is 13s late: beyond skew
write('skew','access.log',L)
