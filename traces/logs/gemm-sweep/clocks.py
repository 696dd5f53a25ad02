#!/usr/bin/env python3
"""Each H100 held-out run's SM clock and power (the median of the last 70% of its nvidia-smi
samples, traces/h100-N/logs/*.clocks.csv) beside its whatif and predict errors, from the outputs
of `unpad validate --hw h100-sxm --workloads traces/h100-N/workloads-heldout.csv` saved as
DIR/val-N.txt (N = 3..7):  python3 traces/logs/gemm-sweep/clocks.py DIR"""
import os, re, statistics, sys
import numpy as np
VAL = sys.argv[1]
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..'))
def clock(n, wl):
    f = f'{ROOT}/traces/h100-{n}/logs/{wl}.clocks.csv'
    rows = [l for l in open(f) if not l.startswith('#')]
    c = [float(l.split(',')[1].split()[0]) for l in rows]
    p = [float(l.split(',')[2].split()[0]) for l in rows]
    # samples of the steady part: the last 70%
    k = int(len(c) * 0.3)
    return statistics.median(c[k:]), statistics.median(p[k:])
X = []
for n in (3, 4, 5, 6, 7):
    for l in open(f'{VAL}/val-{n}.txt'):
        m = re.match(r'(heldout-w-\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)', l)
        if not m: continue
        wl = m.group(1); e = float(m.group(5)); ep = float(m.group(6))
        try: c, p = clock(n, wl)
        except Exception as ex: continue
        X.append((n, wl, e, ep, c, p))
a = np.array([[x[2], x[3], x[4], x[5]] for x in X])
print('n', len(X), 'corr(whatif err, clock) %.2f  corr(predict err, clock) %.2f' % (np.corrcoef(a[:,0], a[:,2])[0,1], np.corrcoef(a[:,1], a[:,2])[0,1]))
by = {}
for x in X: by.setdefault(x[1], []).append(x)
for wl, v in sorted(by.items(), key=lambda kv: statistics.mean(x[4] for x in kv[1])):
    print(f'{wl[10:]:36s} clock {statistics.mean(x[4] for x in v):5.0f} MHz power {statistics.mean(x[5] for x in v):4.0f} W  whatif err {statistics.mean(x[2] for x in v):+5.2f}%  predict err {statistics.mean(x[3] for x in v):+5.2f}%')
