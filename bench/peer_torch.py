#!/usr/bin/env python3
"""peer_torch.py — PyTorch peers of unpad-train for the same BERT pre-training step.

Variants (each in its own process, so peak memory is its own); a suffix ':ad' gives the unpadded
variants the model's attention-probability dropout (else they have none), a suffix ':fp8' runs their
encoder's four Linear layers (QKV, attention output, FFN1, FFN2) as FP8 products, as unpad-train's
--fp8 on does (suffixes combine: unpad-compile:ad:fp8):
  hf-padded            Hugging Face BertForPreTraining, every sequence padded to --pad (512), SDPA
                       attention (with the model's attention dropout), its own MLM head over all
                       positions (what the library does with `labels`)
  unpad-eager          a packed (unpadded) BERT written here: tokens of all sequences back to back,
                       fused QKV, variable-length flash attention (torch.nn.attention.varlen.varlen_attn;
                       with ':ad' torch.ops.aten._flash_attention_forward with dropout, which autograd
                       differentiates through its flash backward), the MLM head on the masked
                       positions only, eager mode
  unpad-compile        the same with every encoder layer torch.compile'd (default mode, automatic
                       dynamic shapes: the first batch compiles static, the next one with a new token
                       count once more with a symbolic one; the 24 identical layers share the graph)
  unpad-compile-max    the same in mode max-autotune-no-cudagraphs (Triton GEMM autotuning)
  unpad-compile-model  the whole model torch.compile'd at once (default mode)
A compiled variant is given up when its warm-up steps take longer than --compile-limit seconds
(default 300: the whole model compiled with FP8 products took 163 s on an H100).
FP8 (':fp8'), the same products as the trainer's: the forward Y = X W^T as E4M3 x E4M3 with fast
accumulation and the bias in the product's epilogue, the data gradient dX = dY W as E5M2 x E4M3 (the
weight's transposed E4M3 copy, made in the forward), the weight gradient in bf16; torch._scaled_mm
(cuBLASLt) with per-tensor scales from each tensor's current max |x| (dynamic scaling, as torchao's
tensorwise float8 training; the trainer's scales come from the last 16 steps' maxima, which spares
the reduction before each cast). Under torch.compile Inductor fuses the maxima and the casts into
neighbouring kernels where it can, but each max is still a reduction pass before its cast (bench/
peer_layer.py profiles one layer). Before its run the variant checks one product forward and backward
against bf16.
All: bf16 autocast over fp32 weights, --optimizer adamw (torch.optim.AdamW(fused=True): one
multi-tensor kernel, less work than LAMB's per-tensor trust ratios; the default, the fastest) or
lamb (LAMB as the trainer runs it: global-norm clipping, Adam moments, decoupled weight decay,
per-tensor trust ratio, written with torch._foreach ops), dropout 0.1 on hidden states, synthetic
tokens with lengths drawn from the same length distribution as the trainer's --synthetic mode, 15%
masked (at most 76), random NSP labels. The unpadded model is initialised as BERT is (normal, std
0.02; zero biases), as the Hugging Face model is.

Prints one line per variant:  variant  samples/s  tokens/s  ms/step  peak GiB  median ms  host ms  compiled
(and a JSON line): the timed steps' wall time, the median step's GPU period (CUDA events), the median host
time to enqueue a step, and the graphs torch.compile compiled inside the timed steps; and
with --ours P=LOG,... (unpad-train logs of the same batch, run with --attn-dropout P) a table of
ours beside every peer of the same attention dropout, with the ratio ours / peer and each side's
products (P:fp8=LOG marks a run with --fp8 on). Each of ours is judged against the fastest of those
peers, whatever its products (the target ratio, met or MISSED): the best PyTorch can do with that
dropout. A bf16 run set against an FP8 peer, or an FP8 run against a bf16 one, says so.

usage: peer_torch.py [--model models/bert-large.cfg] [--dist models/dists/wiki512.csv] [--batch 56]
                     [--steps 10] [--warmup 3] [--optimizer adamw|lamb]
                     [--variants hf-padded,unpad-eager,unpad-compile] [--ours P=LOG,...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

TARGET_RATIO = 1.4  # ours / the fastest PyTorch peer doing the same work (make bench)


def read_cfg(path):
    cfg = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            cfg[k] = v
    return cfg


def read_dist(path):
    lens, counts = [], []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line or not line[0].isdigit():
            continue
        parts = line.split(",")
        if len(parts) >= 2:
            lens.append(int(parts[0]))
            counts.append(float(parts[1]))
        else:
            lens.append(int(parts[0]))
            counts.append(1.0)
    p = np.array(counts) / sum(counts)
    return np.array(lens), p


def make_batches(args, cfg, nbatches):
    rng = np.random.default_rng(args.seed)
    lens_tab, p = read_dist(args.dist)
    V = int(cfg["vocab"])
    out = []
    for _ in range(nbatches):
        lens = np.clip(rng.choice(lens_tab, size=args.batch, p=p), 8, args.pad)
        seqs = []
        for L in lens:
            ids = rng.integers(1000, V, size=L)
            split = int(rng.integers(2, L - 2))
            ids[0], ids[split], ids[L - 1] = 101, 102, 102
            types = (np.arange(L) > split).astype(np.int64)
            cand = np.array([i for i in range(1, L - 1) if i != split])
            npred = min(max(1, int(round(0.15 * L))), 76)
            pos = np.sort(rng.choice(cand, size=npred, replace=False))
            labels = ids[pos].copy()
            ids[pos] = 103
            seqs.append((ids, types, pos, labels, int(rng.integers(0, 2))))
        out.append(seqs)
    return out


# ---- FP8 products -----------------------------------------------------------------------------
E4M3_MAX, E5M2_MAX = 448.0, 57344.0


def fp8_linear_fn(torch):
    """An autograd function computing x W^T + b with FP8 operands (see the module's docstring)."""
    e4m3, e5m2, bf16 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16

    def quant(t, fmax, dtype):
        # per-tensor scale from the current max |t|; returns the FP8 tensor and the dequantizing scale
        amax = t.abs().amax().float().clamp(min=1e-12)
        scale = fmax / amax
        return (t.float() * scale).clamp(-fmax, fmax).to(dtype), scale.reciprocal()

    class Fp8Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            shape = x.shape
            x2 = x.reshape(-1, shape[-1]).to(bf16)
            x8, sx = quant(x2, E4M3_MAX, e4m3)
            w8, sw = quant(w, E4M3_MAX, e4m3)
            wt8 = w8.t().contiguous()  # (K, N): the data gradient's operand, K-major
            y = torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, bias=b.to(bf16), out_dtype=bf16,
                                 use_fast_accum=True)
            ctx.save_for_backward(x2, wt8, sw)
            ctx.shape, ctx.wdtype, ctx.bdtype = shape, w.dtype, b.dtype
            return y.reshape(*shape[:-1], y.shape[-1])

        @staticmethod
        def backward(ctx, dy):
            x2, wt8, sw = ctx.saved_tensors
            dy2 = dy.reshape(-1, dy.shape[-1]).to(bf16)
            g8, sg = quant(dy2, E5M2_MAX, e5m2)
            dx = torch._scaled_mm(g8, wt8.t(), scale_a=sg, scale_b=sw, out_dtype=bf16)
            dw = (dy2.t() @ x2).to(ctx.wdtype)
            db = dy2.float().sum(0).to(ctx.bdtype)
            return dx.reshape(ctx.shape), dw, db

    return Fp8Linear


def check_fp8_linear(torch, lin_fn, dev):
    """One product of BERT-Large's FFN1 shape, forward and backward, FP8 against bf16: relative L2
    of y, dx, dw and db. E4M3 / E5M2 round to 2^-4 / 2^-3, so a correct product is within a few
    percent; a wrong scale or layout is off by O(1). Raises when any exceeds 0.1."""
    g = torch.Generator(device=dev).manual_seed(5)
    x = torch.randn(1003, 1024, device=dev, generator=g, dtype=torch.bfloat16)
    w = (0.02 * torch.randn(4096, 1024, device=dev, generator=g)).requires_grad_()
    b = (0.1 * torch.randn(4096, device=dev, generator=g)).requires_grad_()
    dy = torch.randn(1003, 4096, device=dev, generator=g, dtype=torch.bfloat16)
    out = {}
    for name, f in (("fp8", lambda xx: lin_fn.apply(xx, w, b)),
                    ("bf16", lambda xx: torch.nn.functional.linear(xx, w.to(torch.bfloat16), b.to(torch.bfloat16)))):
        xx = x.clone().requires_grad_()
        y = f(xx)
        y.backward(dy)
        out[name] = [t.float() for t in (y, xx.grad, w.grad, b.grad)]
        w.grad = b.grad = None
    errs = {k: float((a - r).norm() / r.norm()) for k, a, r in zip(("y", "dx", "dw", "db"), out["fp8"], out["bf16"])}
    print("fp8 check (relative L2 against bf16, M 1003, N 4096, K 1024): " +
          " ".join(f"{k} {v:.4f}" for k, v in errs.items()), flush=True)
    if not all(v <= 0.1 for v in errs.values()):
        raise SystemExit("peer_torch.py: the FP8 product disagrees with bf16 beyond 0.1")


# ---- the unpadded model ----------------------------------------------------------------------
def build_unpadded(cfg, torch, attn_dropout, fp8=False):
    nn = torch.nn
    F = torch.nn.functional
    H, NH, FF = int(cfg["hidden"]), int(cfg["heads"]), int(cfg["ffn"])
    L, V, P, TV = int(cfg["layers"]), int(cfg["vocab"]), int(cfg["max_position"]), int(cfg["type_vocab"])
    eps = float(cfg["layernorm_eps"])
    pdrop = float(cfg["hidden_dropout"])
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        varlen_attn = None

    def attn(q, k, v, cu, maxlen, training):
        pa = attn_dropout if training else 0.0
        if varlen_attn is not None and pa == 0.0:
            return varlen_attn(q, k, v, cu, cu, maxlen, maxlen)
        out = torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, maxlen, maxlen, pa, False, False)
        return out[0]

    lin_fn = fp8_linear_fn(torch) if fp8 else None

    class Fp8Linear(nn.Linear):
        def forward(self, x):
            return lin_fn.apply(x, self.weight, self.bias)

    Lin = Fp8Linear if fp8 else nn.Linear

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = Lin(H, 3 * H)
            self.o = Lin(H, H)
            self.ln1 = nn.LayerNorm(H, eps=eps)
            self.f1 = Lin(H, FF)
            self.f2 = Lin(FF, H)
            self.ln2 = nn.LayerNorm(H, eps=eps)

        def forward(self, x, cu, maxlen):
            T = x.shape[0]
            q, k, v = self.qkv(x).view(T, 3, NH, H // NH).unbind(1)
            a = attn(q, k, v, cu, maxlen, self.training).reshape(T, H)
            x = self.ln1(x + F.dropout(self.o(a), pdrop, self.training))
            h = self.f2(F.gelu(self.f1(x)))
            return self.ln2(x + F.dropout(h, pdrop, self.training))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word = nn.Embedding(V, H)
            self.pos = nn.Embedding(P, H)
            self.tok_type = nn.Embedding(TV, H)
            self.ln = nn.LayerNorm(H, eps=eps)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])
            self.pool = nn.Linear(H, H)
            self.nsp = nn.Linear(H, 2)
            self.t = nn.Linear(H, H)
            self.tln = nn.LayerNorm(H, eps=eps)
            self.dec_bias = nn.Parameter(torch.zeros(V))

        def forward(self, ids, types, positions, cu, maxlen, mpos, mlabels, cls_rows, nsp):
            x = self.word(ids) + self.pos(positions) + self.tok_type(types)
            x = F.dropout(self.ln(x), pdrop, self.training)
            for layer in self.layers:
                x = layer(x, cu, maxlen)
            m = self.tln(F.gelu(self.t(x[mpos])))
            logits = m @ self.word.weight.t() + self.dec_bias
            mlm = F.cross_entropy(logits.float(), mlabels)
            pooled = torch.tanh(self.pool(x[cls_rows]))
            nspl = F.cross_entropy(self.nsp(pooled).float(), nsp)
            return mlm + nspl

    model = Bert()
    for mod in model.modules():  # BERT's initializer_range, as BertForPreTraining does
        if isinstance(mod, (nn.Linear, nn.Embedding)):
            nn.init.normal_(mod.weight, std=0.02)
        if isinstance(mod, nn.Linear) and mod.bias is not None:
            nn.init.zeros_(mod.bias)
    return model


def pack(seqs, torch, dev):
    ids = np.concatenate([s[0] for s in seqs])
    types = np.concatenate([s[1] for s in seqs])
    lens = [len(s[0]) for s in seqs]
    cu = np.concatenate([[0], np.cumsum(lens)])
    positions = np.concatenate([np.arange(l) for l in lens])
    mpos = np.concatenate([s[2] + cu[i] for i, s in enumerate(seqs)])
    ml = np.concatenate([s[3] for s in seqs])
    nsp = np.array([s[4] for s in seqs])
    t = lambda a, dt=torch.int64: torch.from_numpy(np.asarray(a)).to(dev, dt)
    return (t(ids), t(types), t(positions), t(cu, torch.int32), int(max(lens)), t(mpos), t(ml),
            t(cu[:-1]), t(nsp))


def pad(seqs, L, torch, dev):
    n = len(seqs)
    ids = np.zeros((n, L), np.int64)
    types = np.zeros((n, L), np.int64)
    mask = np.zeros((n, L), np.int64)
    lab = np.full((n, L), -100, np.int64)
    for i, s in enumerate(seqs):
        l = len(s[0])
        ids[i, :l], types[i, :l], mask[i, :l] = s[0], s[1], 1
        lab[i, s[2]] = s[3]
    nsp = np.array([s[4] for s in seqs])
    t = lambda a: torch.from_numpy(a).to(dev)
    return t(ids), t(types), t(mask), t(lab), t(nsp)


class ForeachLamb:
    """LAMB as the trainer runs it (kernels/lamb.cu): gradients clipped to a global norm, Adam moments
    with bias correction, decoupled weight decay, update scaled by ||w|| / ||u|| per tensor; every
    tensor at once through torch._foreach ops (a handful of multi-tensor kernels per step)."""

    def __init__(self, params, torch, lr, wd, max_norm=1.0, b1=0.9, b2=0.999, eps=1e-6):
        self.torch = torch
        self.params = [p for p in params if p.requires_grad]
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.lr, self.wd, self.max_norm, self.b1, self.b2, self.eps, self.t = lr, wd, max_norm, b1, b2, eps, 0

    def step(self):
        torch, b1, b2 = self.torch, self.b1, self.b2
        self.t += 1
        with torch.no_grad():
            g = [p.grad for p in self.params]
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(g)))
            g = torch._foreach_mul(g, torch.clamp(self.max_norm / (norm + 1e-6), max=1.0))
            torch._foreach_lerp_(self.m, g, 1 - b1)
            torch._foreach_mul_(self.v, b2)
            torch._foreach_addcmul_(self.v, g, g, value=1 - b2)
            u = torch._foreach_div(self.m, 1 - b1 ** self.t)
            d = torch._foreach_sqrt(torch._foreach_div(self.v, 1 - b2 ** self.t))
            torch._foreach_add_(d, self.eps)
            torch._foreach_div_(u, d)
            torch._foreach_add_(u, self.params, alpha=self.wd)
            wn = torch.stack(torch._foreach_norm(self.params))
            un = torch.stack(torch._foreach_norm(u))
            ratio = torch.where((wn > 0) & (un > 0), wn / un, torch.ones_like(wn)) * -self.lr
            torch._foreach_mul_(u, list(ratio.unbind()))
            torch._foreach_add_(self.params, u)

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None


def dynamo_graphs(torch):
    """Graphs torch.compile has compiled so far in this process (0 without the counter)."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])
    except (ImportError, KeyError, TypeError):
        return 0


def run_variant(args):
    import torch

    cfg = read_cfg(args.model)
    dev = "cuda"
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    batches = make_batches(args, cfg, args.warmup + args.steps)
    if args.variant == "hf-padded":
        from transformers import BertConfig, BertForPreTraining

        conf = BertConfig(vocab_size=int(cfg["vocab"]), hidden_size=int(cfg["hidden"]),
                          num_hidden_layers=int(cfg["layers"]), num_attention_heads=int(cfg["heads"]),
                          intermediate_size=int(cfg["ffn"]), max_position_embeddings=int(cfg["max_position"]),
                          type_vocab_size=int(cfg["type_vocab"]), layer_norm_eps=float(cfg["layernorm_eps"]),
                          hidden_dropout_prob=float(cfg["hidden_dropout"]),
                          attention_probs_dropout_prob=float(cfg["attn_dropout"]))
        conf._attn_implementation = "sdpa"
        model = BertForPreTraining(conf).to(dev)
        inputs = [pad(b, args.pad, torch, dev) for b in batches]

        def step(inp):
            ids, types, mask, lab, nsp = inp
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=lab,
                            next_sentence_label=nsp)
            return out.loss
    else:
        base, *flags = args.variant.split(":")
        if any(f not in ("ad", "fp8") for f in flags):
            raise SystemExit(f"peer_torch.py: unknown suffix in {args.variant} (':ad', ':fp8')")
        if "fp8" in flags:
            check_fp8_linear(torch, fp8_linear_fn(torch), dev)
        model = build_unpadded(cfg, torch, float(cfg["attn_dropout"]) if "ad" in flags else 0.0,
                               fp8="fp8" in flags).to(dev)
        inputs = [pack(b, torch, dev) for b in batches]
        fwd = model
        if base in ("unpad-compile", "unpad-compile-max"):
            mode = "max-autotune-no-cudagraphs" if base == "unpad-compile-max" else None
            for layer in model.layers:
                layer.compile(mode=mode)
        elif base == "unpad-compile-model":
            fwd = torch.compile(model)
        elif base != "unpad-eager":
            raise SystemExit(f"peer_torch.py: unknown variant {args.variant}")

        def step(inp):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return fwd(*inp)
    model.train()
    if args.optimizer == "lamb":
        opt = ForeachLamb(model.parameters(), torch, lr=1e-4, wd=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    t0 = time.time()
    for i in range(args.warmup):
        loss = step(inputs[i])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    print(f"{args.variant}: warm-up ({args.warmup} steps, compile included) {warm_s:.1f} s", flush=True)
    torch.cuda.reset_peak_memory_stats()
    graphs0 = dynamo_graphs(torch)
    tokens = 0
    # an event at each step's start (and one after the last): the GPU's period of each step; the
    # host's time to enqueue each step (no synchronisation inside the window): where it reaches
    # the GPU's period, either the host bounds the peer or it ran ahead until the launch queue filled
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
    host = []
    t0 = time.time()
    for j, i in enumerate(range(args.warmup, args.warmup + args.steps)):
        h0 = time.perf_counter()
        marks[j].record()
        loss = step(inputs[i])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        host.append(time.perf_counter() - h0)
        tokens += sum(len(s[0]) for s in batches[i])
    marks[-1].record()
    torch.cuda.synchronize()
    dt = time.time() - t0
    period = sorted(marks[j].elapsed_time(marks[j + 1]) for j in range(args.steps))
    median = lambda v: (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
    flags = args.variant.split(":")[1:]
    attn_p = float(cfg["attn_dropout"]) if args.variant == "hf-padded" or "ad" in flags else 0.0
    res = {"variant": args.variant, "attn_dropout": attn_p, "fp8": "fp8" in flags,
           "samples_per_s": args.batch * args.steps / dt,
           "tokens_per_s": tokens / dt,
           "ms_per_step": 1e3 * dt / args.steps, "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
           "loss": float(loss), "warmup_s": warm_s,
           "median_ms": median(period), "samples_per_s_median": args.batch * 1e3 / median(period),
           "host_ms_median": 1e3 * median(sorted(host)),
           "graphs_compiled_in_window": dynamo_graphs(torch) - graphs0}
    print("RESULT " + json.dumps(res), flush=True)


def read_ours(spec):
    """P=LOG,... (P:fp8=LOG for --fp8 on): samples/s and ms/step of the last window line of each
    unpad-train log, run with attention dropout P."""
    rows = []
    for item in filter(None, spec.split(",")):
        p, _, path = item.partition("=")
        p, _, kind = p.partition(":")
        fp8 = kind == "fp8"
        row = {"variant": f"unpad-train (attention dropout {float(p):g}{', FP8 products' if fp8 else ''})",
               "attn_dropout": float(p), "fp8": fp8}
        try:
            lines = [l for l in open(path) if l.startswith("step ")]
            m = re.search(r"([0-9.]+) samples/s .*\| ([0-9.]+) ms/step", lines[-1])
            row.update(samples_per_s=float(m.group(1)), ms_per_step=float(m.group(2)))
        except (OSError, IndexError, AttributeError) as e:
            row["error"] = f"no step line in {path} ({type(e).__name__})"
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/bert-large.cfg")
    ap.add_argument("--dist", default="models/dists/wiki512.csv")
    ap.add_argument("--batch", type=int, default=56)
    ap.add_argument("--pad", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--optimizer", choices=("adamw", "lamb"), default="adamw")
    ap.add_argument("--variants", default="hf-padded,unpad-eager,unpad-compile")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--compile-limit", type=float, default=300.0)
    ap.add_argument("--ours", default="", help="P=unpad-train log (run with --attn-dropout P),...")
    args = ap.parse_args()
    if args.variant:
        return run_variant(args)
    results = []
    for v in args.variants.split(","):
        cmd = [sys.executable, __file__, "--variant", v] + [
            f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
            ("model", "dist", "batch", "pad", "steps", "warmup", "seed", "optimizer")]
        # a compiled variant gets the compile limit on top of a generous run time
        limit = 100 if "compile" not in v else args.compile_limit + 25
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            sys.stdout.write(p.stdout)
            if p.returncode:
                sys.stdout.write(p.stderr[-3000:])
            res = [json.loads(l[7:]) for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            if res and "compile" in v and res[0]["warmup_s"] > args.compile_limit:
                res[0]["note"] = "compile took longer than the limit"
            results += res or [{"variant": v, "error": f"exit {p.returncode}"}]
        except subprocess.TimeoutExpired:
            results.append({"variant": v, "error": f"did not finish within {limit:.0f} s"})
        sys.stdout.flush()
    opt = "fused AdamW" if args.optimizer == "adamw" else "foreach LAMB"
    print(f"{'peer (' + opt + ')':<28} {'samples/s':>10} {'tokens/s':>11} {'ms/step':>8} {'peak GiB':>9} "
          f"{'median ms':>9} {'host ms':>8} {'compiled':>8}")
    for r in results:
        if "error" in r:
            print(f"{r['variant']:<28} {r['error']}")
        else:
            print(f"{r['variant']:<28} {r['samples_per_s']:>10.1f} {r['tokens_per_s']:>11.0f} "
                  f"{r['ms_per_step']:>8.1f} {r['peak_gib']:>9.2f} {r['median_ms']:>9.1f} {r['host_ms_median']:>8.1f} "
                  f"{r['graphs_compiled_in_window']:>8d}")
    print(f"  samples/s and ms/step: the {args.steps} timed steps' wall time after {args.warmup} warm-up steps; "
          "median ms: the median step's GPU period (CUDA events at each step's start); host ms: the median "
          "host time to enqueue a step (near the period: bound by the host, or by a full launch queue); "
          "compiled: graphs torch.compile compiled inside the timed steps (0 for a steady peer)")
    ours = read_ours(args.ours)
    if ours:
        # each peer beside the trainer run with the same attention dropout, either products
        def same_dropout(o, r):
            return "error" not in o and "error" not in r and r.get("attn_dropout", 0.0) == o["attn_dropout"]

        prod = lambda x: "fp8" if x.get("fp8") else "bf16"
        print(f"{'attn p':>6} {'ours':<5} {'ours samples/s':>15} {'peer':<28} {'peer':<5} {'peer samples/s':>15} "
              f"{'ours/peer':>9}")
        for o in ours:
            for r in results:
                if same_dropout(o, r):
                    ratio = o["samples_per_s"] / r["samples_per_s"]
                    print(f"{o['attn_dropout']:>6g} {prod(o):<5} {o['samples_per_s']:>15.1f} {r['variant']:<28} "
                          f"{prod(r):<5} {r['samples_per_s']:>15.1f} {ratio:>9.3f}")
        # the target of `make bench`: ours at least TARGET_RATIO x the fastest peer of its dropout
        for o in ours:
            same = [r for r in results if same_dropout(o, r)]
            if not same:
                if "error" not in o:
                    print(f"attention dropout {o['attn_dropout']:g}, ours {prod(o)}: no peer with that dropout ran, "
                          "not judged")
                continue
            best = max(same, key=lambda r: r["samples_per_s"])
            ratio = o["samples_per_s"] / best["samples_per_s"]
            verdict = f"target {TARGET_RATIO}x: {'met' if ratio >= TARGET_RATIO else 'MISSED'}"
            differ = "" if prod(o) == prod(best) else f"; products differ: ours {prod(o)}, the peer's {prod(best)}"
            print(f"attention dropout {o['attn_dropout']:g}, ours {prod(o)}: {o['samples_per_s']:.1f} samples/s, "
                  f"the fastest peer {best['variant']} {best['samples_per_s']:.1f}: {ratio:.3f}x ({verdict}{differ})")
    print("PEERS " + json.dumps(results + ours))


if __name__ == "__main__":
    sys.exit(main())
