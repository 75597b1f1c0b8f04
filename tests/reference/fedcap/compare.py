#!/usr/bin/env python3
"""FedCAP's code beside Bastion, per row: the paper's figure at round 100 for every finished seed.

Usage: compare.py CODE_LOG_DIR BASTION_RESULTS_DIR > table.md

CODE_LOG_DIR holds parse_log.py's fedcap-<row>-s<seed>.csv (round 0..100: g = the model each benign client
holds after the server's send, p = its model after local training); BASTION_RESULTS_DIR holds run_bastion.sh's
<row>-s<seed>/rounds.csv. The figure is FedAvg-FT's p (its locally updated models) and, for Ditto and FedCAP,
TAcc = max(final g, last p) (plot/Figure7.py): the code's g[100] and p[99]; Bastion's p_racc_w and p_acc_w
at round 100 (eval.personal_received_final = "next"), both sample-weighted over benign clients, in %.
A run that stopped before its last round is left out and counted. Standard library only.
"""
import csv
import os
import statistics
import sys

ROWS = ["fedavgft-sf", "ditto-sf", "ditto01-sf", "fedcap-sf", "fedavgft-none", "fedcap-none"]
SEEDS = [1, 2, 3]


def code_figure(path, row):
    if not os.path.exists(path):
        return None
    rounds = {int(r["round"]): r for r in csv.DictReader(open(path))}
    if 100 not in rounds or 99 not in rounds:
        return None
    p = float(rounds[99]["p"])
    if row.startswith("fedavgft"):
        return p
    return max(p, float(rounds[100]["g"]))


def bastion_figure(path, row):
    if not os.path.exists(path):
        return None
    last = list(csv.DictReader(open(path)))[-1]
    if int(last["round"]) != 100:
        return None
    p = 100 * float(last["p_acc_w"])
    if row.startswith("fedavgft"):
        return p
    return max(p, 100 * float(last["p_racc_w"]))


def cell(values):
    done = [v for v in values if v is not None]
    if not done:
        return "–", 0
    if len(done) == 1:
        return f"{done[0]:.2f}", 1
    return f"{statistics.mean(done):.2f} ± {statistics.stdev(done):.2f}", len(done)


def main():
    code_dir, bastion_dir = sys.argv[1], sys.argv[2]
    print("| row | code: per seed (1, 2, 3) | code: mean ± std | Bastion: per seed (1, 2, 3) | Bastion: mean ± std |")
    print("|---|---|---:|---|---:|")
    for row in ROWS:
        code = [code_figure(os.path.join(code_dir, f"fedcap-{row}-s{s}.csv"), row) for s in SEEDS]
        ours = [bastion_figure(os.path.join(bastion_dir, f"{row}-s{s}", "rounds.csv"), row) for s in SEEDS]
        show = lambda vs: ", ".join("stopped" if v is None else f"{v:.2f}" for v in vs)
        (code_mean, n_code), (our_mean, n_ours) = cell(code), cell(ours)
        print(f"| {row} | {show(code)} | {code_mean} (n={n_code}) | {show(ours)} | {our_mean} (n={n_ours}) |")


if __name__ == "__main__":
    main()
