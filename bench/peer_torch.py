#!/usr/bin/env python3
"""peer_torch.py — PyTorch peers of unpad-train for the same BERT pre-training step.

Variants (each in its own process, so peak memory is its own):
  hf-padded       Hugging Face BertForPreTraining, every sequence padded to --pad (512), SDPA attention,
                  its own MLM head over all positions (what the library does with `labels`)
  unpad-eager     a packed (unpadded) BERT written here: tokens of all sequences back to back, fused
                  QKV, variable-length flash attention (torch.nn.attention.varlen.varlen_attn), the
                  MLM head on the masked positions only, eager mode
  unpad-compile   the same with every encoder layer torch.compile'd (dynamic shapes; regional
                  compilation: the 24 identical layers share one compiled graph, as PyTorch's
                  cold-start recipe does); given up when the warm-up steps take longer than
                  --compile-limit seconds
All: bf16 autocast over fp32 weights, fused AdamW (torch.optim.AdamW(fused=True): one multi-tensor
kernel, the same optimizer traffic class as LAMB's fused step but without the per-tensor trust
ratios), dropout 0.1 on hidden states (attention-probability dropout only in hf-padded: varlen_attn
has none), synthetic tokens with lengths drawn from the same length distribution as the trainer's
--synthetic mode, 15% masked (at most 76), random NSP labels. The unpadded model is initialised as
BERT is (normal, std 0.02; zero biases), as the Hugging Face model is.

Prints one line per variant:  variant  samples/s  tokens/s  peak GiB  (and a JSON line with all).

usage: peer_torch.py [--model models/bert-large.cfg] [--dist models/dists/wiki512.csv] [--batch 56]
                     [--steps 10] [--warmup 3] [--variants hf-padded,unpad-eager,unpad-compile]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np


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


# ---- the unpadded model ----------------------------------------------------------------------
def build_unpadded(cfg, torch):
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

    def attn(q, k, v, cu, maxlen):
        if varlen_attn is not None:
            return varlen_attn(q, k, v, cu, cu, maxlen, maxlen)
        out = torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, maxlen, maxlen, 0.0, False, False)
        return out[0]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(H, 3 * H)
            self.o = nn.Linear(H, H)
            self.ln1 = nn.LayerNorm(H, eps=eps)
            self.f1 = nn.Linear(H, FF)
            self.f2 = nn.Linear(FF, H)
            self.ln2 = nn.LayerNorm(H, eps=eps)

        def forward(self, x, cu, maxlen):
            T = x.shape[0]
            q, k, v = self.qkv(x).view(T, 3, NH, H // NH).unbind(1)
            a = attn(q, k, v, cu, maxlen).reshape(T, H)
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
        model = build_unpadded(cfg, torch).to(dev)
        inputs = [pack(b, torch, dev) for b in batches]
        fwd = model
        if args.variant == "unpad-compile":
            for layer in model.layers:
                layer.compile(dynamic=True)

        def step(inp):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return fwd(*inp)
    model.train()
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
    tokens = 0
    t0 = time.time()
    for i in range(args.warmup, args.warmup + args.steps):
        loss = step(inputs[i])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens += sum(len(s[0]) for s in batches[i])
    torch.cuda.synchronize()
    dt = time.time() - t0
    res = {"variant": args.variant, "samples_per_s": args.batch * args.steps / dt, "tokens_per_s": tokens / dt,
           "ms_per_step": 1e3 * dt / args.steps, "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
           "loss": float(loss), "warmup_s": warm_s}
    print("RESULT " + json.dumps(res), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/bert-large.cfg")
    ap.add_argument("--dist", default="models/dists/wiki512.csv")
    ap.add_argument("--batch", type=int, default=56)
    ap.add_argument("--pad", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--variants", default="hf-padded,unpad-eager,unpad-compile")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--compile-limit", type=float, default=200.0)
    args = ap.parse_args()
    if args.variant:
        return run_variant(args)
    results = []
    for v in args.variants.split(","):
        cmd = [sys.executable, __file__, "--variant", v] + [
            f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
            ("model", "dist", "batch", "pad", "steps", "warmup", "seed")]
        # the compiled variant gets the compile limit on top of a generous run time
        limit = 100 if v != "unpad-compile" else args.compile_limit + 25
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            sys.stdout.write(p.stdout)
            if p.returncode:
                sys.stdout.write(p.stderr[-3000:])
            res = [json.loads(l[7:]) for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            if res and v == "unpad-compile" and res[0]["warmup_s"] > args.compile_limit + 30:
                res[0]["note"] = "compile took longer than the limit"
            results += res or [{"variant": v, "error": f"exit {p.returncode}"}]
        except subprocess.TimeoutExpired:
            results.append({"variant": v, "error": f"did not finish within {limit:.0f} s"})
    print(f"{'peer':<15} {'samples/s':>10} {'tokens/s':>11} {'ms/step':>8} {'peak GiB':>9}")
    for r in results:
        if "error" in r:
            print(f"{r['variant']:<15} {r['error']}")
        else:
            print(f"{r['variant']:<15} {r['samples_per_s']:>10.1f} {r['tokens_per_s']:>11.0f} "
                  f"{r['ms_per_step']:>8.1f} {r['peak_gib']:>9.2f}")
    print("PEERS " + json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
