#!/usr/bin/python3
"""PyTorch twin of one FedFSA Table 1 round (configs/papers/fedfsa-table1.toml, row FedFSA): seconds per round.

MAINTAINER-ONLY SCRIPT (no part of Bastion runs Python): it puts PyTorch's cost of FedFSA's client work
next to Bastion's round (issue 38's side-by-side figure; bench/fedfsa_round_vs_pytorch.sh runs both,
interleaved). Run it with Debian's interpreter, which has python3-torch 1.13:

    /usr/bin/python3 bench/reference/pytorch_fedfsa_round.py [--rounds 3] [--warmup 1] [--threads 1]
                                                             [--data fmnist|random] [--data-dir DIR] [--json]
                                                             [--cpu-time]

The work of a round, as fl/clients/sam_family.cpp (variant fedfsa) and nn/optim.cpp (Sam::step) do it
with the preset's settings (fedfsa-fmnist-base.toml + the FedFSA row: lr 0.1, no SGD momentum, no weight
decay, grad_clip 10 before the ascent and on the final direction (sam_clip = both), rho 0.1, rho_larger
0.2, top_c 2, alpha 0.1, sensitivity = code, 10 local epochs, batch 48, shuffled, last partial batch kept):
  - 10 of 100 clients drawn per round; each starts from the global weights (copied into one model).
  - its linear term (1 - alpha) m, m = -mean_update / (K lr) (the previous round's mean update; none in
    the first round), K = epochs x ceil(n_i / batch) = 10 x ceil(490 / 48) = 110 steps;
  - its radii: rho_larger on the Top-C tensors it chose at its last participation, rho elsewhere;
  - K SAM steps, each: zero grads, forward + backward at w; clip ||g|| to 10; e_k = rho_k g_k / (||g|| + 1e-12)
    (||g|| the global norm); save w, w += e; zero grads, forward + backward at w + e (same batch);
    restore w from the saved copy; g' = alpha g' + linear term; clip ||g'|| to 10; SGD step w -= lr g';
  - its Top-C for next time: per weight tensor (not biases) mean((minmax(w_after) - minmax(w_before))^2),
    the 2 largest; its update w_after - w_global.
  - the server: w_global += mean of the 10 updates (FedAvg, uniform, server lr 1); that mean is the next
    round's mean_update.
The timed span is what Bastion's train_s + aggregate_s (timing.csv) measure; Bastion's per-round
personalised evaluation (eval_s) and the head tuning after its last round are not part of it, and not
replicated here. Data: Fashion-MNIST's 70,000 training and test images pooled, Normalize(0.5, 0.5), dealt
out IID to 100 clients of 700 (490 train + 210 local test, of which only the 490 are used), from the
.gz IDX files in --data-dir; Bastion deals Pat(5) or Dir(0.5) shards of the same sizes (the arithmetic
does not depend on which classes a client holds). --data random: N(0, 1) images and uniform labels of
the same shapes. Round 1 (the warm-up) has no momentum term and no Top-C yet, as Bastion's round 1.
PyTorch's own ways where they differ from Bastion's: clip_grad_norm_ (1.13) multiplies every gradient by
min(1, 10 / ||g||) on every call, where Bastion scales only when ||g|| > 10; the sensitivity is computed in
float (Bastion: double); PyTorch's default initialisation. The first is one more pass over the
gradients when ||g|| <= 10; the others change no pass.
--cpu-time times each round in the process's CPU seconds (time.process_time) instead of wall seconds, beside
scripts/cpu_preset_round.sh's figure for Bastion, where other work shares the cores.
Prints the parameter count (asserted equal to cnn-fedfsa's in Bastion: 1,258,798) and the steps per
round, then the median of the timed rounds' wall time in pytorch_fl_round.py's format.
"""
import argparse
import collections
import gzip
import json
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

# cnn-fedfsa: the same definition the train-step twin uses (run from any folder: Python puts this
# script's folder on sys.path).
from pytorch_train_step import FedfsaCnn

CLIENTS, PER_ROUND, CLASSES = 100, 10, 10
POOLED, TEST_FRACTION = 70000, 0.3
EPOCHS, BATCH, LR, CLIP = 10, 48, 0.1, 10.0
RHO, RHO_LARGER, TOP_C, ALPHA = 0.1, 0.2, 2, 0.1
BASTION_PARAMETERS = 1258798  # cnn-fedfsa at 1x28x28, 10 classes (nn/models.cpp)


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def client_shards(data, data_dir, seed):
    """(x, y) of each client's training share: 490 of 700 pooled samples each (70/30 split)."""
    share = POOLED // CLIENTS
    train = share - int(round(TEST_FRACTION * share))
    if data == "random":
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(CLIENTS * train, 1, 28, 28, generator=gen)
        y = torch.randint(0, CLASSES, (CLIENTS * train,), generator=gen)
        return [(x[c * train:(c + 1) * train], y[c * train:(c + 1) * train]) for c in range(CLIENTS)]
    images, labels = [], []
    for prefix in ("train", "t10k"):
        images.append(read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28))
        labels.append(read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"), 8))
    images, labels = np.concatenate(images), np.concatenate(labels).astype(np.int64)
    assert len(images) == POOLED and len(labels) == POOLED, "expected 70,000 pooled Fashion-MNIST images"
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - 0.5) / 0.5  # Normalize((0.5), (0.5)), once at load
    y = torch.from_numpy(labels)
    order = torch.randperm(POOLED, generator=torch.Generator().manual_seed(seed))
    shards = []
    for c in range(CLIENTS):
        idx = order[c * share:c * share + train]
        shards.append((x[idx].contiguous(), y[idx].contiguous()))
    return shards


class Twin:
    def __init__(self, shards, seed):
        torch.manual_seed(seed)
        self.model = FedfsaCnn(1, 28)
        self.names = [n for n, _ in self.model.named_parameters()]
        self.params = list(self.model.parameters())
        self.global_w = [p.detach().clone() for p in self.params]
        self.saved = [torch.empty_like(p) for p in self.params]  # SAM's copy of w, kept across steps as Bastion's
        self.shards = shards
        self.mean_update = None  # the previous round's mean accepted update (server momentum)
        self.top_c = {}          # client -> indices into params of its Top-C tensors
        self.rng = torch.Generator().manual_seed(seed + 1)
        self.steps_last_round, self.train_loss, self.choices = 0, 0.0, ""

    def sam_step(self, x, y, radii, linear, opt):
        params = self.params
        opt.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        with torch.no_grad():
            # ||g|| of the clipped gradient, read again (as Bastion's perturbation and FSA.py's _grad_norm do)
            norm = float(torch.norm(torch.stack([p.grad.norm(2) for p in params]), 2))
            for p, s, r in zip(params, self.saved, radii):
                s.copy_(p)
                p.add_(p.grad, alpha=r / (norm + 1e-12))
        opt.zero_grad()
        F.cross_entropy(self.model(x), y).backward()
        with torch.no_grad():
            for p, s in zip(params, self.saved):
                p.copy_(s)
                p.grad.mul_(ALPHA)
            if linear is not None:
                for p, l in zip(params, linear):
                    p.grad.add_(l)
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        return loss.item()

    def sensitivity_top_c(self, before):
        scores = []
        for k, (name, p) in enumerate(zip(self.names, self.params)):
            if any(word in name.lower() for word in ("bn", "downsample", "shortcut", "norm", "bias")):
                continue
            a, b = p.detach(), before[k]
            mm_a = (a - a.min()) / (a.max() - a.min())
            mm_b = (b - b.min()) / (b.max() - b.min())
            score = float(((mm_a - mm_b) ** 2).mean())
            if math.isfinite(score):
                scores.append((score, k))
        scores.sort(key=lambda t: -t[0])  # stable: ties keep model order, as fsa_top_c
        return [k for _, k in scores[:TOP_C]]

    def train_client(self, client):
        x_all, y_all = self.shards[client]
        n = x_all.size(0)
        steps_planned = EPOCHS * ((n + BATCH - 1) // BATCH)
        with torch.no_grad():
            for p, g in zip(self.params, self.global_w):
                p.copy_(g)
        start = self.global_w
        linear = None
        if self.mean_update is not None:
            scale = -(1.0 - ALPHA) / (steps_planned * LR)
            linear = [u * scale for u in self.mean_update]
        radii = [RHO] * len(self.params)
        for k in self.top_c.get(client, []):
            radii[k] = RHO_LARGER
        opt = torch.optim.SGD(self.params, lr=LR, momentum=0.0, weight_decay=0.0)
        gen = torch.Generator().manual_seed(1000 * client + 7)
        steps, loss_sum = 0, 0.0
        for _ in range(EPOCHS):
            order = torch.randperm(n, generator=gen)
            for at in range(0, n, BATCH):
                idx = order[at:at + BATCH]
                loss_sum += self.sam_step(x_all[idx], y_all[idx], radii, linear, opt)
                steps += 1
        assert steps == steps_planned
        self.top_c[client] = self.sensitivity_top_c(start)
        with torch.no_grad():
            update = [p.detach() - g for p, g in zip(self.params, start)]
        return update, steps, loss_sum / steps

    def round(self):
        clients = torch.randperm(CLIENTS, generator=self.rng)[:PER_ROUND].tolist()
        updates, self.steps_last_round, losses = [], 0, []
        for c in clients:
            update, steps, loss = self.train_client(c)
            updates.append(update)
            losses.append(loss)
            self.steps_last_round += steps
        self.train_loss = sum(losses) / len(losses)  # as rounds.csv's train_loss: mean over clients of their step mean
        # The Top-C choices of the round's clients, counted (Bastion writes them to client_notes.csv).
        chosen = collections.Counter(" ".join(self.names[k] for k in self.top_c[c]) for c in clients)
        self.choices = ", ".join("%s x%d" % (names, n) for names, n in chosen.most_common())
        with torch.no_grad():
            mean = [torch.stack([u[k] for u in updates]).mean(0) for k in range(len(self.params))]
            for g, m in zip(self.global_w, mean):
                g.add_(m)  # server lr 1 on the plain mean of the updates
        self.mean_update = mean


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds after the warm-up")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (round 1 has no momentum term)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", choices=["fmnist", "random"], default="fmnist")
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cpu-time", action="store_true", help="CPU seconds of the process instead of wall seconds")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)

    shards = client_shards(args.data, args.data_dir, args.seed)
    twin = Twin(shards, args.seed)
    parameters = sum(p.numel() for p in twin.params)
    assert parameters == BASTION_PARAMETERS, "cnn-fedfsa has %d parameters in Bastion, the twin %d" % (
        BASTION_PARAMETERS, parameters)
    sizes = sorted({s[0].size(0) for s in shards})
    if not args.json:
        print("torch %s, %d thread(s), data %s; model cnn-fedfsa: %d parameters (%s)" % (
            torch.__version__, args.threads, args.data, parameters,
            " ".join("%s %s" % (n, "x".join(map(str, p.shape))) for n, p in zip(twin.names, twin.params))), flush=True)
    clock = time.process_time if args.cpu_time else time.perf_counter
    times, steps = [], []
    for r in range(args.warmup + args.rounds):
        t0 = clock()
        twin.round()
        seconds = clock() - t0
        steps.append(twin.steps_last_round)
        if r >= args.warmup:
            times.append(seconds)
        if not args.json:
            print("round %d%s: %.3f s, %d SAM steps, train loss %.4f, Top-C chosen: %s" % (
                r + 1, " (warm-up)" if r < args.warmup else "", seconds, twin.steps_last_round, twin.train_loss,
                twin.choices), flush=True)
    per_client = EPOCHS * ((sizes[0] + BATCH - 1) // BATCH)
    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": args.threads, "data": args.data,
                          "parameters": parameters, "client_samples": sizes, "steps_per_client": per_client,
                          "steps_per_round": steps, "seconds": times, "median": statistics.median(times)}))
        return
    print("steps per round: %s (%d clients x %d epochs x ceil(%s / %d) = %d each)" % (
        " ".join(map(str, steps)), PER_ROUND, EPOCHS, "/".join(map(str, sizes)), BATCH, per_client))
    print("fedfsa workers 1 x threads %d: median %.3f s/round  (%s)" % (
        args.threads, statistics.median(times), " ".join("%.3f" % t for t in times)), flush=True)


if __name__ == "__main__":
    main()
