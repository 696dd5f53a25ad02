#!/usr/bin/env python3
"""compare_hf.py — the trainer against Hugging Face BertForPreTraining on the same weights and batch.

unpad-train --dump-weights W --dump-grads G (one step, --no-dropout, --virtual-ranks 1) writes the
bf16 weights its first step used, the fp32 gradients of that step, the packed batch and its losses.
This script loads W into transformers' BertForPreTraining (fp32, TF32 off, eager attention, dropout
off), feeds the same sequences padded to the longest with an attention mask, computes the MLM loss
(mean over the masked positions) and the NSP loss (mean over the sequences) as the trainer does,
back-propagates their sum, and compares the losses and the gradient of every parameter tensor.

Each comparison has its own bound on the relative error |ours - peer| / |peer| (L2 over the tensor).
The trainer runs in bf16 (activations and weights, fp32 accumulation), the peer in fp32 on the same
bf16-valued weights, so the bounds are bf16 bounds: the losses within 1e-2, gradients within 5e-2
(1.5e-1 for the position and token-type embeddings, sums over many rows with cancellation). The
fp32 build of the trainer (unpad-train --precision fp32: fp32 activations and weights, GEMMs without
TF32, a plain fp32 FMHA) is run with tight bounds instead (bench_train.sh: gradients 1e-4, losses
1e-5): what is left is the order of fp32 sums, so a wrong scale, a missed term or a transposed
weight that a bf16 bound could hide shows at once. The
key bias gets no gradient in exact arithmetic (softmax is shift-invariant per row): the trainer
writes it as zero, which must hold exactly, and its error against the peer's rounding noise is
measured against the norm of the same layer's query-bias gradient. Prints a table; exits 1 if any bound is exceeded.

usage: compare_hf.py --model models/bert-tiny.cfg --weights W --grads G [--gelu tanh|erf]
       compare_hf.py --grads G --against G2 [--grad-bound 1e-2]
The second form compares two trainer dumps of the same global batch, e.g. one micro-batch of 2B
sequences against --virtual-ranks 2 of B each: the accumulated gradients must agree (1e-2).
"""
import argparse
import struct
import sys

import numpy as np
import torch


def read_cfg(path):
    cfg = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            cfg[k] = v
    return cfg


def read_dump(path):
    out = {}
    with open(path, "rb") as f:
        if f.read(8) != b"UNPADDMP":
            sys.exit(f"{path}: not an unpad dump")
        version, count = struct.unpack("<II", f.read(8))
        if version != 1:
            sys.exit(f"{path}: dump version {version}, expected 1")
        for _ in range(count):
            (nl,) = struct.unpack("<I", f.read(4))
            name = f.read(nl).decode()
            dtype, ndim = struct.unpack("<II", f.read(8))
            dims = struct.unpack("<%dq" % ndim, f.read(8 * ndim))
            n = int(np.prod(dims)) if ndim else 1
            dt = np.float32 if dtype == 0 else np.int32
            out[name] = np.frombuffer(f.read(4 * n), dtype=dt).reshape(dims).copy()
    return out


def hf_model(c, gelu, attn, dev):
    """transformers' BertForPreTraining of config c (read_cfg), fp32, TF32 off, dropout 0."""
    from transformers import BertConfig, BertForPreTraining

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    config = BertConfig(
        vocab_size=int(c["vocab"]), hidden_size=int(c["hidden"]), num_hidden_layers=int(c["layers"]),
        num_attention_heads=int(c["heads"]), intermediate_size=int(c["ffn"]),
        hidden_act="gelu_pytorch_tanh" if gelu == "tanh" else "gelu",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=int(c["max_position"]), type_vocab_size=int(c["type_vocab"]),
        layer_norm_eps=float(c["layernorm_eps"]), tie_word_embeddings=True)
    config._attn_implementation = attn
    return BertForPreTraining(config).to(dev).float()


def compare_dumps(args):
    A, B = read_dump(args.grads), read_dump(args.against)
    fails, worst, n = 0, 0.0, 0
    la, lb = A["loss.mlm,loss.nsp,mlm_correct,nsp_correct"], B["loss.mlm,loss.nsp,mlm_correct,nsp_correct"]
    for i, name in enumerate(("loss.mlm", "loss.nsp")):
        err = abs(la[i] - lb[i]) / max(abs(lb[i]), 1e-12)
        ok = err <= args.loss_bound
        fails += not ok
        n += 1
        print(f"{name:<60} {la[i]:>12.6g} {lb[i]:>12.6g} {err:>9.2e} {'yes' if ok else 'NO'}")
    for name, g in A.items():
        if name.startswith("batch.") or name.startswith("loss."):
            continue
        h = B[name].astype(np.float64)
        g = g.astype(np.float64)
        scale = np.linalg.norm(h)
        key_bias = name.endswith("attention.self.key.bias")
        if key_bias:
            scale = np.linalg.norm(B[name.replace("key.bias", "query.bias")])
        err = np.linalg.norm(g - h) / max(scale, 1e-30)
        if key_bias and (np.any(g != 0) or np.any(h != 0)):  # the trainer writes it as zero, exactly
            err = float("inf")
        ok = err <= args.grad_bound
        fails += not ok
        worst = max(worst, err)
        n += 1
        if not ok or "layer.0." in name or not name.startswith("bert.encoder"):
            print(f"{name:<60} {np.linalg.norm(g):>12.4g} {np.linalg.norm(h):>12.4g} {err:>9.2e} "
                  f"{'yes' if ok else 'NO'}")
    print(f"compare dumps: {n - fails}/{n} within bounds (losses {args.loss_bound:g}, gradients "
          f"{args.grad_bound:g}); worst gradient rel err {worst:.3e}")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--weights")
    ap.add_argument("--against", help="a second trainer dump to compare G with (no peer)")
    ap.add_argument("--grads", required=True)
    ap.add_argument("--gelu", default="tanh", choices=["tanh", "erf"])
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"])
    ap.add_argument("--grad-bound", type=float, default=5e-2)
    ap.add_argument("--loss-bound", type=float, default=1e-2)
    args = ap.parse_args()
    if args.against:
        return compare_dumps(args)
    if not args.model or not args.weights:
        ap.error("--model and --weights are needed (or --against)")

    c = read_cfg(args.model)
    dev = "cuda"
    model = hf_model(c, args.gelu, args.attn, dev)
    model.eval()  # dropout off (the probabilities are 0 anyway)

    W = read_dump(args.weights)
    G = read_dump(args.grads)
    params = dict(model.named_parameters())
    state = {k: torch.from_numpy(v) for k, v in W.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if "decoder" not in m and "position_ids" not in m]
    if unexpected or missing:
        sys.exit(f"state dict mismatch: unexpected {unexpected}, missing {missing}")
    # the tied decoder must be the word embedding
    assert model.cls.predictions.decoder.weight.data_ptr() == \
        model.bert.embeddings.word_embeddings.weight.data_ptr(), "decoder weight not tied"

    ids, types = G["batch.ids"], G["batch.types"]
    cu, rows = G["batch.cu_seqlens"], G["batch.mlm_rows"]
    labels, nsp = G["batch.mlm_labels"], G["batch.nsp_labels"]
    n = len(cu) - 1
    lens = np.diff(cu)
    L = int(lens.max())
    inp = np.zeros((n, L), np.int64)
    tt = np.zeros((n, L), np.int64)
    mask = np.zeros((n, L), np.int64)
    lab = np.full((n, L), -100, np.int64)
    for s in range(n):
        a, b = cu[s], cu[s + 1]
        inp[s, : b - a] = ids[a:b]
        tt[s, : b - a] = types[a:b]
        mask[s, : b - a] = 1
    seq_of_row = np.searchsorted(cu, rows, side="right") - 1
    for r, l, s in zip(rows, labels, seq_of_row):
        lab[s, r - cu[s]] = l
    t = lambda x: torch.from_numpy(x).to(dev)
    out = model(input_ids=t(inp), token_type_ids=t(tt), attention_mask=t(mask))
    V = int(c["vocab"])
    mlm = torch.nn.functional.cross_entropy(out.prediction_logits.reshape(-1, V), t(lab).reshape(-1),
                                            ignore_index=-100)
    nspl = torch.nn.functional.cross_entropy(out.seq_relationship_logits, t(nsp.astype(np.int64)))
    (mlm + nspl).backward()
    pred = out.prediction_logits.argmax(-1)
    sel = t(lab) >= 0
    mlm_correct = int((pred[sel] == t(lab)[sel]).sum())

    ours = G["loss.mlm,loss.nsp,mlm_correct,nsp_correct"]
    fails = 0
    rows_out = []

    def row(name, mine, peer, bound):
        nonlocal fails
        err = abs(mine - peer) / max(abs(peer), 1e-12)
        ok = err <= bound
        fails += not ok
        rows_out.append((name, f"{mine:.6g}", f"{peer:.6g}", err, bound, ok))

    row("loss.mlm", float(ours[0]), float(mlm.detach()), args.loss_bound)
    row("loss.nsp", float(ours[1]), float(nspl.detach()), args.loss_bound)
    worst = 0.0
    for name, g in G.items():
        if name.startswith("batch.") or name.startswith("loss."):
            continue
        p = params.get(name)
        if p is None:
            print(f"{name}: not a parameter of the peer", file=sys.stderr)
            fails += 1
            continue
        peer = p.grad.detach().double().cpu().numpy()
        mine = g.astype(np.float64)
        if peer.shape != mine.shape:
            print(f"{name}: shape {mine.shape} vs peer {peer.shape}", file=sys.stderr)
            fails += 1
            continue
        pn = np.linalg.norm(peer)
        scale = pn
        key_bias = name.endswith("attention.self.key.bias")
        if key_bias:
            # zero in exact arithmetic (softmax ignores a shift shared by a row's scores): the peer
            # holds rounding noise, so the error is measured against the query bias' gradient; the
            # trainer writes it as zero, which must hold exactly
            scale = np.linalg.norm(params[name.replace("key.bias", "query.bias")].grad.double().cpu().numpy())
        err = np.linalg.norm(mine - peer) / max(scale, 1e-30)
        if key_bias and np.any(mine != 0):
            err = float("inf")
        bound = args.grad_bound
        if "position_embeddings" in name or "token_type_embeddings" in name:
            bound = 3 * args.grad_bound
        ok = err <= bound
        fails += not ok
        worst = max(worst, err)
        rows_out.append((name, f"{np.linalg.norm(mine):.4g}", f"{pn:.4g}", err, bound, ok))

    print(f"peer: transformers BertForPreTraining fp32 ({args.attn} attention, GELU {args.gelu}); "
          f"batch {n} sequences, {int(cu[-1])} tokens, {len(rows)} predictions, padded to {L}")
    print(f"MLM correct: ours {int(ours[2])}, peer {mlm_correct} of {len(rows)}")
    w = max(len(r[0]) for r in rows_out)
    print(f"{'tensor':<{w}}  {'ours (|g|)':>12}  {'peer (|g|)':>12}  {'rel err':>9}  {'bound':>7}  ok")
    for r in rows_out:
        print(f"{r[0]:<{w}}  {r[1]:>12}  {r[2]:>12}  {r[3]:>9.2e}  {r[4]:>7.0e}  {'yes' if r[5] else 'NO'}")
    print(f"compare_hf: {len(rows_out) - fails}/{len(rows_out)} within bounds; worst gradient rel err "
          f"{worst:.3e}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
