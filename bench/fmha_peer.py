#!/usr/bin/env python3
"""fmha_peer.py — PyTorch's variable-length flash attention on the lengths bench_fmha wrote, timed
the same way (median of CUDA-event times, warm-up first), printed beside bench_fmha's result lines
(without and with attention dropout 0.1) with the ratio PyTorch time / ours.

  python3 bench/fmha_peer.py --lengths fmha_lengths.txt --ours fmha_result.csv [--heads 16]

Peers, each if this torch has it:
  varlen_attn   torch.nn.attention.varlen.varlen_attn forward, autograd backward (grads of q, k, v)
  aten flash    torch.ops.aten._flash_attention_forward / _backward called directly (no autograd),
                also with dropout 0.1 (its own Philox mask, regenerated in its backward)
  sdpa loop     scaled_dot_product_attention per sequence (only if neither of the above works)
q, k, v are views of one (T, 3, NH, 64) bf16 tensor, as in unpad."""
import argparse
import csv
import inspect
import statistics
import sys

import torch


def timed(fn, reps, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        times.append((e0, e1))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="fmha_lengths.txt")
    ap.add_argument("--ours", default="fmha_result.csv")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()

    lens = [int(x) for x in open(a.lengths) if x.strip() and not x.startswith("#")]
    NH, D = a.heads, 64
    T, max_len = sum(lens), max(lens)
    sum_len2 = float(sum(l * l for l in lens))
    fwd_flop = 4.0 * sum_len2 * D * NH
    bwd_flop = 2.5 * fwd_flop
    dev = torch.device("cuda")
    torch.manual_seed(0)
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)), dtype=torch.int32, device=dev)
    qkv = (torch.rand(T, 3, NH, D, device=dev, dtype=torch.float32) * 4 - 2).to(torch.bfloat16)
    dout = (torch.rand(T, NH, D, device=dev, dtype=torch.float32) * 2 - 1).to(torch.bfloat16)
    print(f"fmha_peer: torch {torch.__version__}, {torch.cuda.get_device_name()}, {len(lens)} sequences, "
          f"T = {T}, max_len = {max_len}, sum len^2 = {sum_len2:.0f}, NH = {NH}")

    rows = []  # (name, dropout, fwd_ms, bwd_ms, total_ms)

    # 1. torch.nn.attention.varlen.varlen_attn + autograd
    try:
        from torch.nn.attention.varlen import varlen_attn
        print(f"fmha_peer: varlen_attn{inspect.signature(varlen_attn)}")
        leaf = qkv.clone().requires_grad_(True)
        q, k, v = leaf.unbind(1)

        def fwd():
            return varlen_attn(q, k, v, cu, cu, max_len, max_len)

        out = fwd()
        def bwd():
            torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

        def both():
            o = fwd()
            torch.autograd.grad(o, (q, k, v), dout)

        rows.append(("torch varlen_attn + autograd", 0.0, timed(fwd, a.reps), timed(bwd, a.reps), timed(both, a.reps)))
    except Exception as e:  # noqa: BLE001 - report and try the next peer
        print(f"fmha_peer: varlen_attn unavailable: {type(e).__name__}: {e}")

    # 2. the aten flash-attention ops directly, without and with dropout
    for p_drop in (0.0, 0.1):
        try:
            q, k, v = qkv.unbind(1)
            f = torch.ops.aten._flash_attention_forward
            b = torch.ops.aten._flash_attention_backward

            def fwd2():
                return f(q, k, v, cu, cu, max_len, max_len, p_drop, False, False)

            res = fwd2()

            def bwd2():
                b(dout, q, k, v, res[0], res[1], cu, cu, max_len, max_len, p_drop, False, res[2], res[3])

            def both2():
                r = fwd2()
                b(dout, q, k, v, r[0], r[1], cu, cu, max_len, max_len, p_drop, False, r[2], r[3])

            rows.append(("torch aten flash fwd/bwd direct", p_drop, timed(fwd2, a.reps), timed(bwd2, a.reps),
                         timed(both2, a.reps)))
        except Exception as e:  # noqa: BLE001
            print(f"fmha_peer: aten _flash_attention_forward/_backward (dropout {p_drop}) unavailable: "
                  f"{type(e).__name__}: {e}")

    # 3. fallback: SDPA per sequence
    if not rows:
        import torch.nn.functional as F
        leaf = qkv.clone().requires_grad_(True)
        offs = cu.tolist()

        def fwd3():
            outs = []
            for i in range(len(lens)):
                x = leaf[offs[i]:offs[i + 1]]
                qq, kk, vv = (x[:, j].transpose(0, 1).unsqueeze(0) for j in range(3))
                outs.append(F.scaled_dot_product_attention(qq, kk, vv))
            return outs

        def both3():
            outs = fwd3()
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])

        t3f = timed(fwd3, a.reps)
        t3t = timed(both3, a.reps)
        rows.append(("torch sdpa per sequence", 0.0, t3f, t3t - t3f, t3t))

    ours = {}
    try:
        with open(a.ours) as fh:
            for r in csv.DictReader(fh):
                ours[float(r.get("dropout", 0.0))] = r
    except OSError as e:
        print(f"fmha_peer: no result from bench_fmha ({a.ours}): {e}")

    print(f"{'implementation':36s} {'drop':>4s} {'fwd ms':>9s} {'bwd ms':>9s} {'total ms':>9s} {'fwd TF/s':>8s} "
          f"{'bwd TF/s':>8s} {'tot TF/s':>8s} {'this/ours':>9s}")
    for p_drop in (0.0, 0.1):
        mine = ours.get(p_drop)
        if mine:
            of, ob, ot = float(mine["fwd_ms"]), float(mine["bwd_ms"]), float(mine["total_ms"])
            print(f"{'unpad fmha (bench_fmha)':36s} {p_drop:4.1f} {of:9.4f} {ob:9.4f} {ot:9.4f} "
                  f"{fwd_flop / of * 1e-9:8.1f} {bwd_flop / ob * 1e-9:8.1f} {(fwd_flop + bwd_flop) / ot * 1e-9:8.1f} "
                  f"{1.0:9.3f}")
        for name, pd, tf, tb, tt in rows:
            if pd != p_drop:
                continue
            ratio = f"{tt / float(mine['total_ms']):9.3f}" if mine else f"{'-':>9s}"
            print(f"{name:36s} {pd:4.1f} {tf:9.4f} {tb:9.4f} {tt:9.4f} {fwd_flop / tf * 1e-9:8.1f} "
                  f"{bwd_flop / tb * 1e-9:8.1f} {(fwd_flop + bwd_flop) / tt * 1e-9:8.1f} {ratio}")
        peers = [r for r in rows if r[1] == p_drop]
        if mine and peers:
            best = min(peers, key=lambda r: r[4])
            print(f"fmha_peer: dropout {p_drop}: fastest PyTorch ({best[0]}) fwd+bwd {best[4]:.4f} ms, "
                  f"ours {float(mine['total_ms']):.4f} ms: PyTorch / ours = {best[4] / float(mine['total_ms']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
