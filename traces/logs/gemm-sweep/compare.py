#!/usr/bin/env python3
"""The encoder's GEMM operators modelled two ways, each fitted per (model, operator) on the traced
rows of the H100 calibration runs (traces/h100-{3,4,6}/calib-w-*.csv) and judged on the held-out
traces of the five H100 starts (traces/h100-{3..7}/heldout-traces.tar.gz):
  affine  dur = a + b T                        (T: the micro-batch's tokens)
  table   dur = c + s G(T) + b T               (G: the products' times measured alone, bench_gemm --sweep)
  table2  dur = c + s G(T)                     (--two-terms)
For each held-out workload: the GEMM operators' summed error as a share of the whole traced step.
With --validate DIR (the outputs of `unpad validate --hw h100-sxm --workloads
traces/h100-N/workloads-heldout.csv` as DIR/val-N.txt), each workload's whatif error moved by the
difference between the two, and the count within 2%.
  python3 traces/logs/gemm-sweep/compare.py [--two-terms] [--validate DIR]"""
import collections, csv, glob, gzip, io, os, re, sys, tarfile
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, '..', '..', '..'))
two = '--two-terms' in sys.argv
vdir = sys.argv[sys.argv.index('--validate') + 1] if '--validate' in sys.argv else None
sweep = {}
for h in (1024, 768):
    d = collections.defaultdict(dict)
    with gzip.open(f'{here}/sweep-h{h}.csv.gz', 'rt') as f:
        for r in csv.DictReader(l for l in f if not l.startswith('#')):
            d[r['product']][int(r['tokens'])] = float(r['us'])
    sweep[h] = {p: (np.array(sorted(v)), np.array([v[t] for t in sorted(v)])) for p, v in d.items()}
OPS = {'qkv_fwd': ['qkv_fwd'], 'attn_out_fwd': ['attn_out_fwd'], 'ffn1_fwd': ['ffn1_fwd'], 'ffn2_fwd': ['ffn2_fwd'],
       'ffn2_bwd': ['ffn2_wgrad', 'ffn2_dgrad'], 'ffn1_bwd': ['ffn1_wgrad', 'ffn1_dgrad'],
       'attn_out_bwd': ['attn_out_wgrad', 'attn_out_dgrad'], 'qkv_bwd': ['qkv_wgrad', 'qkv_dgrad']}
HID = {'bert-large': 1024, 'bert-base': 768}

def G(model, op, T):
    return sum(np.interp(T, *sweep[HID[model]][p]) for p in OPS[op])

def rows(name, text):
    return [(r['model'], int(r['step']), int(r['rank']), r['op'], int(r['tokens']), float(r['dur_us']))
            for r in csv.DictReader(l for l in io.StringIO(text) if not l.startswith('#'))]

def feats(model, op, T, table):
    if not table:
        return [1.0, T]
    return [1.0, G(model, op, T)] + ([] if two else [T])

cal = []
for n in (3, 4, 6):
    for f in sorted(glob.glob(f'{root}/traces/h100-{n}/calib-w-*.csv')):
        cal += rows(f, open(f).read())
fit = {}
for m in HID:
    for op in OPS:
        R = [r for r in cal if r[0] == m and r[3] == op and r[4] >= 128]
        y = np.array([r[5] for r in R])
        for table in (0, 1):
            X = np.array([feats(m, op, r[4], table) for r in R])
            fit[m, op, table] = np.linalg.lstsq(X / y[:, None], np.ones_like(y), rcond=None)[0]  # relative error
delta = {}
for n in (3, 4, 5, 6, 7):
    print(f'H100 start {n}: workload, GEMM share of the traced step, GEMM error as % of the step: affine, table')
    with tarfile.open(f'{root}/traces/h100-{n}/heldout-traces.tar.gz') as t:
        for mem in sorted(t.getmembers(), key=lambda x: x.name):
            R = rows(mem.name, t.extractfile(mem).read().decode())
            meas = pa = pt = total = 0.0
            for (m, st, rk, op, T, dur) in R:
                total += dur
                if op in OPS and T >= 128:
                    meas += dur
                    pa += np.dot(fit[m, op, 0], feats(m, op, T, 0))
                    pt += np.dot(fit[m, op, 1], feats(m, op, T, 1))
            wl = mem.name[len('heldout-w-'):-4]
            ea, et = 100 * (pa - meas) / total, 100 * (pt - meas) / total
            delta[n, wl] = et - ea
            print(f'  {wl:34s} {100 * meas / total:5.1f}%  {ea:+5.2f}%  {et:+5.2f}%')
if vdir:
    tot = [0, 0]
    for n in (3, 4, 5, 6, 7):
        c = [0, 0]
        for l in open(f'{vdir}/val-{n}.txt'):
            mm = re.match(r'heldout-w-(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)', l)
            if mm:
                e = float(mm.group(2))
                c[0] += abs(e) < 2
                c[1] += abs(e + delta[n, mm.group(1)]) < 2
        print(f'start {n}: whatif within 2%: shipped {c[0]} of 20, with the table\'s GEMM error instead {c[1]}')
        tot = [tot[0] + c[0], tot[1] + c[1]]
    print(f'five starts: {tot[0]} and {tot[1]} of 100')
