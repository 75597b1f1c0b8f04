#!/usr/bin/python3
"""PyTorch twin of configs/bench/fl-round.toml: seconds per FedAvg round, timed.

MAINTAINER-ONLY SCRIPT (no part of Bastion runs Python): it puts PyTorch's round cost next to Bastion's
in bench/RESULTS.md. Run it with Debian's interpreter, which has python3-torch 1.13:

    /usr/bin/python3 bench/reference/pytorch_fl_round.py [--rounds 12] [--step sgd sam] [--workers 1 2]

A round = 10 clients x 600 samples x 2 local epochs of LeNet (1x28x28) at batch 64, SGD(lr 0.01,
momentum 0.9, fresh optimizer per client as in Bastion), each client starting from the global weights,
then the plain mean of the 10 returned state dicts. The sam step is SAM with rho 0.05 (ascent to
w + rho g/||g||, gradient there, descent from w), as Bastion's `clients.sgd.rho`. Inputs are N(0, 1)
images and uniform labels from a fixed seed (timing does not depend on the pixel values; Bastion's run
uses Fashion-MNIST). Configurations: `--workers 1` trains the clients one after another in this
process with torch.set_num_threads(T) for T in --threads; `--workers 2` trains them in 2 worker
processes (multiprocessing, spawn: a forked child inherits the parent's OpenMP state) with 1 thread each -- the configuration the issue calls PyTorch's best
on 2 cores. Prints, per configuration, the median over rounds 2..rounds-1 of the round's wall time
(round 1 warms up, as scripts/bench_fl_round.sh skips it).
"""
import argparse
import multiprocessing as mp
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CLIENTS, SAMPLES, EPOCHS, BATCH, CLASSES = 10, 600, 2, 64, 10


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def client_data(client):
    gen = torch.Generator().manual_seed(1000 + client)
    return torch.randn(SAMPLES, 1, 28, 28, generator=gen), torch.randint(0, CLASSES, (SAMPLES,), generator=gen)


def train_client(args):
    state, client, step, rho = args
    model = LeNet()
    model.load_state_dict(state)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = client_data(client)
    gen = torch.Generator().manual_seed(client)
    for _ in range(EPOCHS):
        order = torch.randperm(SAMPLES, generator=gen)
        for start in range(0, SAMPLES, BATCH):
            idx = order[start:start + BATCH]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            if step == "sam":
                params = [p for p in model.parameters()]
                with torch.no_grad():
                    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in params))
                    eps = [rho * p.grad / (norm + 1e-12) for p in params]
                    for p, e in zip(params, eps):
                        p.add_(e)
                opt.zero_grad()
                F.cross_entropy(model(x[idx]), y[idx]).backward()
                with torch.no_grad():
                    for p, e in zip(params, eps):
                        p.sub_(e)
            opt.step()
    return model.state_dict()


def worker_init():
    torch.set_num_threads(1)


def run(step, workers, threads, rounds):
    torch.manual_seed(1)
    torch.set_num_threads(threads)
    state = LeNet().state_dict()
    pool = mp.get_context("spawn").Pool(workers, initializer=worker_init) if workers > 1 else None
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        jobs = [(state, c, step, 0.05) for c in range(CLIENTS)]
        states = pool.map(train_client, jobs, chunksize=1) if pool else [train_client(j) for j in jobs]
        state = {k: torch.stack([s[k] for s in states]).mean(0) for k in state}
        times.append(time.perf_counter() - t0)
    if pool:
        pool.close()
        pool.join()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--step", nargs="+", default=["sgd", "sam"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="threads with --workers 1")
    args = parser.parse_args()
    for step in args.step:
        for workers in args.workers:
            for threads in (args.threads if workers == 1 else [1]):
                times = run(step, workers, threads, args.rounds)
                steady = times[1:-1] if len(times) > 2 else times
                print("%-4s workers %d x threads %d: median %.3f s/round  (%s)" % (
                    step, workers, threads, statistics.median(steady), " ".join("%.3f" % t for t in steady)),
                    flush=True)


if __name__ == "__main__":
    main()
