#!/usr/bin/env python3
"""compare_steps.py — many training steps of unpad-train against Hugging Face BertForPreTraining
driven by a LAMB optimizer written here from the LAMB paper (You et al. 2019, "Large Batch
Optimization for Deep Learning: Training BERT in 76 minutes", Algorithm 2) with the MLPerf BERT
reference's settings, on the same initial weights and the same batches in the same order.

The trainer (the fp32 build, dropout off) is run with
  --log-every 1 --log-file L      the loss and learning rate of every step (JSON lines)
  --dump-weights W                the weights step 1 starts from
  --dump-batches B                every step's packed batch (step.N.batch.ids, ...)
  --dump-final F                  the fp32 master weights after the last step
and this script replays the same steps in fp32 (TF32 off, eager attention): for each step the loss
of the same batch (MLM mean over the masked positions + NSP mean over the sequences), its
gradients, then one LAMB step:

  g      = grad * min(1, max_grad_norm / ||grad||)       global norm over every tensor (clipping)
  m      = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2   b1 0.9, b2 0.999
  m_hat  = m / (1 - b1^t),  v_hat = v / (1 - b2^t)       bias correction, t the 1-based step
  u      = m_hat / (sqrt(v_hat) + eps) + wd * w          eps 1e-6; wd only for weights: no decay of
                                                         biases and LayerNorm parameters (MLPerf)
  r      = ||w|| / ||u|| if both > 0, else 1             per tensor (the trust ratio)
  w      = w - lr_t * r * u
  lr_t   = lr * t / W (t <= W), else lr * (1 - (t - 1 - W) / (N - W))   linear warm-up, then
                                                         polynomial decay (power 1) to 0 at N

Checks (exit 1 if one fails):
  * the learning rate the trainer logged equals lr_t at every step (relative 1e-6);
  * the loss agrees at every step within --loss-bound (relative, default 2e-3);
  * every final weight tensor agrees within --weight-bound (relative L2, default 2e-3), but the
    attention key biases, whose gradient is zero in exact arithmetic (see below at the check).

Why these bounds catch a wrong optimizer (with the run's lr 1e-3, 30 warm-up steps, wd 0.1, 300
steps of bert-tiny; both sides fp32, so what is left is the order of fp32 sums, ~1e-6 per step,
grown by the steps to ~1e-5 .. 1e-4):
  * a wrong trust ratio (r = 1, or ||w|| / ||g||) changes every step's size by 10x-100x for
    bert-tiny's matrices (||w|| / ||u|| is ~0.02-0.1 there): the loss departs within a few steps,
    far beyond 2e-3;
  * the zero cases (r = 1 when ||w|| = 0): the biases start at 0; with r = 0 they never move,
    with r = lr-scaled they move differently: their final tensors differ by O(1);
  * a weight-decay mask that decays LayerNorm or biases, or spares a matrix: wd * lr_t summed over
    the run is ~0.1 * 0.15 = 1.5e-2 of the weight (LayerNorm gamma starts at 1): the affected
    tensors differ by ~1e-2, 5x the bound;
  * no bias correction: step 1 moves the zero-started biases by lr * 3.16 (m / sqrt(v) = 0.1 /
    sqrt(0.001)) instead of lr * 1, and they keep that factor (their later steps are r * u with
    r = ||w|| / ||u||); and the decay term's weight against m / sqrt(v) changes by the factor
    sqrt(1 - b2^t) / (1 - b1^t) (0.15 .. 0.5 over these steps): biases by O(1), matrices by ~1e-2;
  * a schedule off by one step or with another form: the logged lr differs from lr_t (checked to
    1e-6) before any loss does.

usage: compare_steps.py --model CFG --weights W --batches B --log L --final F
                        --steps N --lr X --warmup K --weight-decay WD [--max-grad-norm 1]
                        [--gelu tanh|erf] [--loss-bound 2e-3] [--weight-bound 2e-3]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_hf import hf_model, read_cfg, read_dump  # noqa: E402


def lr_at(t, lr, warmup, steps):
    if warmup > 0 and t <= warmup:
        return lr * t / warmup
    frac = (t - 1 - warmup) / (steps - warmup)
    return lr * (1.0 - min(max(frac, 0.0), 1.0))


class Lamb:
    """LAMB over named parameters (the paper's Algorithm 2, MLPerf's settings; see the header)."""

    def __init__(self, named, weight_decay, betas=(0.9, 0.999), eps=1e-6, max_grad_norm=1.0):
        self.params = [(n, p) for n, p in named]
        self.decay = {n: not ("bias" in n or "LayerNorm" in n) for n, _ in self.params}
        self.m = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in self.params}
        self.v = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in self.params}
        self.wd, self.b1, self.b2, self.eps, self.max_norm = weight_decay, betas[0], betas[1], eps, max_grad_norm

    @torch.no_grad()
    def step(self, t, lr):
        grads = {n: p.grad.double() for n, p in self.params}
        norm = torch.sqrt(sum((g * g).sum() for g in grads.values()))
        clip = min(1.0, self.max_norm / float(norm)) if float(norm) > 0 else 1.0
        bc1, bc2 = 1.0 - self.b1 ** t, 1.0 - self.b2 ** t
        for n, p in self.params:
            g = grads[n] * clip
            m, v = self.m[n], self.v[n]
            m.mul_(self.b1).add_(g, alpha=1.0 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1.0 - self.b2)
            w = p.data.double()
            u = (m / bc1) / (torch.sqrt(v / bc2) + self.eps)
            if self.decay[n]:
                u = u + self.wd * w
            wn, un = float(torch.linalg.vector_norm(w)), float(torch.linalg.vector_norm(u))
            r = wn / un if wn > 0 and un > 0 else 1.0
            p.data.copy_((w - lr * r * u).float())
        return float(norm)


def padded(batch, dev):
    ids, types = batch["ids"], batch["types"]
    cu, rows, labels, nsp = batch["cu_seqlens"], batch["mlm_rows"], batch["mlm_labels"], batch["nsp_labels"]
    n, lens = len(cu) - 1, np.diff(cu)
    L = int(lens.max())
    inp, tt = np.zeros((n, L), np.int64), np.zeros((n, L), np.int64)
    mask, lab = np.zeros((n, L), np.int64), np.full((n, L), -100, np.int64)
    for s in range(n):
        a, b = cu[s], cu[s + 1]
        inp[s, : b - a], tt[s, : b - a], mask[s, : b - a] = ids[a:b], types[a:b], 1
    seq = np.searchsorted(cu, rows, side="right") - 1
    for r, l, s in zip(rows, labels, seq):
        lab[s, r - cu[s]] = l
    t = lambda x: torch.from_numpy(x).to(dev)
    return t(inp), t(tt), t(mask), t(lab), t(nsp.astype(np.int64))


def main():
    ap = argparse.ArgumentParser()
    for a in ("--model", "--weights", "--batches", "--log", "--final"):
        ap.add_argument(a, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--gelu", default="tanh", choices=["tanh", "erf"])
    ap.add_argument("--loss-bound", type=float, default=2e-3)
    ap.add_argument("--weight-bound", type=float, default=2e-3)
    args = ap.parse_args()

    c = read_cfg(args.model)
    dev = "cuda"
    model = hf_model(c, args.gelu, "eager", dev)
    model.train()  # dropout probabilities are 0
    W = read_dump(args.weights)
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in W.items()}, strict=False)
    missing = [m for m in missing if "decoder" not in m and "position_ids" not in m]
    if unexpected or missing:
        sys.exit(f"state dict mismatch: unexpected {unexpected}, missing {missing}")
    named = list(model.named_parameters())  # the tied decoder weight appears once
    opt = Lamb(named, args.weight_decay, max_grad_norm=args.max_grad_norm)

    logged = {}
    for line in open(args.log):
        rec = json.loads(line)
        if rec.get("kind") == "step":
            logged[rec["step"]] = rec
    B = read_dump(args.batches)
    V = int(c["vocab"])
    fails, worst_loss, worst_lr = 0, 0.0, 0.0
    print(f"{'step':>5} {'ours loss':>11} {'peer loss':>11} {'rel err':>9} {'lr':>10} {'grad norm':>10} "
          f"{'peer norm':>10}")
    for t in range(1, args.steps + 1):
        pre = f"step.{t}.batch."
        batch = {k[len(pre):]: v for k, v in B.items() if k.startswith(pre)}
        if not batch:
            sys.exit(f"{args.batches}: no batch of step {t}")
        inp, tt, mask, lab, nsp = padded(batch, dev)
        model.zero_grad(set_to_none=True)
        out = model(input_ids=inp, token_type_ids=tt, attention_mask=mask)
        mlm = torch.nn.functional.cross_entropy(out.prediction_logits.reshape(-1, V), lab.reshape(-1),
                                                ignore_index=-100)
        nspl = torch.nn.functional.cross_entropy(out.seq_relationship_logits, nsp)
        loss = mlm + nspl
        loss.backward()
        lr = lr_at(t, args.lr, args.warmup, args.steps)
        norm = opt.step(t, lr)
        rec = logged.get(t)
        if rec is None:
            print(f"step {t}: not in {args.log} (run the trainer with --log-every 1)")
            fails += 1
            continue
        ours, peer = rec["loss"], float(loss)
        err = abs(ours - peer) / max(abs(peer), 1e-12)
        lerr = abs(rec["lr"] - lr) / max(lr, 1e-30) if lr > 0 else abs(rec["lr"])
        worst_loss, worst_lr = max(worst_loss, err), max(worst_lr, lerr)
        bad = not (err <= args.loss_bound) or not (lerr <= 1e-6)
        fails += bad
        if bad or t <= 3 or t % 25 == 0 or t == args.steps:
            print(f"{t:>5} {ours:>11.6f} {peer:>11.6f} {err:>9.2e} {rec['lr']:>10.4e} "
                  f"{rec['grad_norm'] if rec['grad_norm'] is not None else float('nan'):>10.4g} {norm:>10.4g}"
                  f"{'  LOSS BEYOND BOUND' if err > args.loss_bound else ''}{'  LR DIFFERS' if lerr > 1e-6 else ''}")

    F = read_dump(args.final)
    params = dict(named)
    worst_w, worst_name, nt, skipped = 0.0, "", 0, []
    for name, mine in F.items():
        p = params.get(name)
        if p is None:
            continue
        nt += 1
        if name.endswith("attention.self.key.bias"):
            # The key bias adds q . b_k to every score of a softmax row: a shift the softmax
            # ignores, so its gradient is zero in exact arithmetic and what either side computes is
            # rounding noise (~1e-9). Adam divides that noise by its own root mean square, so both
            # sides move this tensor by O(lr) steps in unrelated directions: no bound on the pair
            # can hold, and nothing downstream depends on it (the losses above show it).
            skipped.append(name)
            continue
        peer = p.detach().double().cpu().numpy()
        err = np.linalg.norm(mine.astype(np.float64) - peer) / max(np.linalg.norm(peer), 1e-30)
        if err > worst_w:
            worst_w, worst_name = err, name
        if not err <= args.weight_bound:
            fails += 1
            print(f"final weight {name}: rel L2 {err:.2e} > {args.weight_bound:g}")
    if nt != len(params):
        print(f"final weights: {nt} tensors compared of the peer's {len(params)}")
        fails += 1
    if skipped:
        print(f"final weights not compared (zero gradient in exact arithmetic): {', '.join(skipped)}")
    print(f"compare_steps: {args.steps} steps, {'ok' if not fails else f'{fails} FAILED'}; worst loss rel err "
          f"{worst_loss:.2e} (bound {args.loss_bound:g}), lr {worst_lr:.1e} (1e-6), final weights {worst_w:.2e} "
          f"(bound {args.weight_bound:g}, {worst_name})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
