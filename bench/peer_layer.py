#!/usr/bin/env python3
"""peer_layer.py — one encoder layer of bench/peer_torch.py's unpadded BERT, forward and backward,
with bf16 and with FP8 products (':fp8'), eager and torch.compile'd: ms a layer, then a profile of
the compiled FP8 layer's GPU kernels (where dynamic scaling's max reductions show).

usage: peer_layer.py [--model models/bert-large.cfg] [--tokens 15448] [--seqs 56] [--reps 20]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_torch as P  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/bert-large.cfg")
    ap.add_argument("--tokens", type=int, default=15448)
    ap.add_argument("--seqs", type=int, default=56)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    import torch

    cfg = P.read_cfg(args.model)
    cfg["layers"] = "1"
    T, n = args.tokens, args.seqs
    lens = [T // n] * (n - 1) + [T - (n - 1) * (T // n)]
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=torch.int32, device="cuda")
    H = int(cfg["hidden"])
    for fp8 in (False, True):
        for compiled in (False, True):
            layer = P.build_unpadded(cfg, torch, 0.0, fp8=fp8).to("cuda").train().layers[0]
            f = torch.compile(layer) if compiled else layer
            x = torch.randn(T, H, device="cuda", requires_grad=True)

            def step():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    y = f(x, cu, max(lens))
                y.float().sum().backward()

            for _ in range(3):
                step()
            torch.cuda.synchronize()
            t0 = time.time()
            for _ in range(args.reps):
                step()
            torch.cuda.synchronize()
            print(f"{'fp8' if fp8 else 'bf16'} {'compiled' if compiled else 'eager'}: "
                  f"{1e3 * (time.time() - t0) / args.reps:.3f} ms a layer, forward + backward", flush=True)
            if fp8 and compiled:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(3):
                        step()
                    torch.cuda.synchronize()
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))


if __name__ == "__main__":
    sys.exit(main())
