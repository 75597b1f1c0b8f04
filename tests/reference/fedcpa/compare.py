#!/usr/bin/env python3
"""FedCPA's code beside Bastion: acc and ASR (%) averaged over a window of rounds, per row.

Usage: compare.py CODE_LOG_DIR BASTION_OUT_DIR FIRST LAST > table.md

CODE_LOG_DIR holds parse_log.py's fedcpa-<row>-s<seed>.csv (round in Bastion's numbering, acc and asr as
fractions); BASTION_OUT_DIR is run_bastion.sh's output (<row>/seed-<s>/rounds.csv). For each row and seed
the mean of acc and asr over rounds FIRST..LAST (both sides evaluate every round); a code run that did not
reach LAST is shown with the rounds it has. Over Bastion's seeds: mean ± sample std. Standard library only.
"""
import csv
import glob
import os
import statistics
import sys

ROWS = ["fedavg", "fedcpa"]


def window(path, first, last):
    rows = [r for r in csv.DictReader(open(path)) if first <= int(r["round"]) <= last]
    if not rows:
        return None
    acc = statistics.mean(100 * float(r["acc"]) for r in rows)
    asr = statistics.mean(100 * float(r["asr"]) for r in rows)
    return acc, asr, max(int(r["round"]) for r in rows)


def spread(values):
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def main():
    code_dir, ours_dir, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(f"Rounds {first}-{last} (mean over the window), acc / ASR in %:\n")
    print("| row | code: seeds | code: acc | code: ASR | Bastion: seeds | Bastion: acc | Bastion: ASR | Bastion ASR per seed |")
    print("|---|---|---:|---:|---|---:|---:|---|")
    for row in ROWS:
        code = []
        for path in sorted(glob.glob(os.path.join(code_dir, f"fedcpa-{row}-s*.csv"))):
            w = window(path, first, last)
            if w:
                code.append((os.path.basename(path).rsplit("-s", 1)[1][:-4], w))
        ours = []
        for path in sorted(glob.glob(os.path.join(ours_dir, row, "seed-*", "rounds.csv"))):
            w = window(path, first, last)
            if w:
                ours.append((path.split("seed-")[1].split("/")[0], w))
        code_note = ", ".join(f"{s} (to round {w[2]})" for s, w in code) or "–"
        print(f"| {row} | {code_note} | {spread([w[0] for _, w in code]) if code else '–'} | "
              f"{spread([w[1] for _, w in code]) if code else '–'} | {', '.join(s for s, _ in ours)} | "
              f"{spread([w[0] for _, w in ours]) if ours else '–'} | {spread([w[1] for _, w in ours]) if ours else '–'} | "
              f"{', '.join(f'{w[1]:.1f}' for _, w in ours)} |")


if __name__ == "__main__":
    main()
