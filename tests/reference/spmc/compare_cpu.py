#!/usr/bin/env python3
"""The SPMC authors' code beside Bastion, round by round, at the CPU reference scale (run_cpu.sh).

Usage: compare_cpu.py --code-dir DIR --bastion-dir DIR --out-md OUT.md --out-csv OUT.csv [--rows fedavg,rlr,bulyan,spmc]

A row written ROW+TAG (e.g. rlr+-ownupdate) takes the code's runs spmc-ROW-s<seed>TAG.csv (a run_cpu.sh SPMC_TAG)
beside Bastion's ROW runs.

Reads DIR/spmc-<row>-s<seed>.csv (parse_log.py: the code's rounds from 0, percent) and
DIR/<row>-s<seed>/rounds.csv (Bastion: rounds from 1, fractions; bfr = 1 - asr). Both ASRs count every
triggered test image, the target class included, and R = 100 - ASR. Rounds are shown in Bastion's numbering
(the code's round r is round r + 1). For each row: A and R at rounds 1, 5, 10, ... and the mean of the last
5 rounds that every run of the row logged; the code's runs one by one (seed s), Bastion's as mean ± sample
standard deviation over its seeds. The CSV has every round. Standard library only.
"""
import argparse
import csv
import glob
import os
import re
import statistics


PATTERN = r"spmc-{row}-s\d+{tag}\.csv"


def read_code(path):
    with open(path) as f:
        return {int(r["round"]) + 1: (float(r["acc"]), float(r["R"])) for r in csv.DictReader(f)
                if r["acc"] not in ("", "None") and r["R"] not in ("", "None")}


def read_bastion(path):
    with open(path) as f:
        return {int(r["round"]): (100 * float(r["acc"]), 100 * float(r["bfr"])) for r in csv.DictReader(f)}


def seed_of(path):
    m = re.search(r"-s(\d+)", path)
    return int(m.group(1)) if m else -1


def mean_sd(values):
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code-dir", required=True)
    ap.add_argument("--bastion-dir", required=True)
    ap.add_argument("--out-md", required=True)
    ap.add_argument("--out-csv", required=True)
    ap.add_argument("--rows", default="fedavg,rlr,bulyan,spmc")
    a = ap.parse_args()
    md, table = [], []
    for spec in a.rows.split(","):
        row, _, tag = spec.partition("+")
        name = PATTERN.format(row=re.escape(row), tag=re.escape(tag))
        code = {seed_of(p): read_code(p) for p in sorted(glob.glob(os.path.join(a.code_dir, f"spmc-{row}-s*.csv")))
                if re.fullmatch(name, os.path.basename(p))}
        ours = {seed_of(p): read_bastion(p)
                for p in sorted(glob.glob(os.path.join(a.bastion_dir, f"{row}-s*", "rounds.csv")))}
        code = {s: c for s, c in code.items() if c}
        ours = {s: b for s, b in ours.items() if b}
        if not code and not ours:
            continue
        every = list(code.values()) + list(ours.values())
        last = min(max(c) for c in every)
        marks = [r for r in [1, 5, 10, 15, 20, 25, 30, 40, 50] if r <= last]
        if last not in marks:
            marks.append(last)
        code_seeds = sorted(code)
        head = ["round"] + [f"A code s{s}" for s in code_seeds] + [f"A Bastion ({len(ours)} seeds)"] \
            + [f"R code s{s}" for s in code_seeds] + [f"R Bastion ({len(ours)} seeds)"]
        md.append(f"### {row}" + (f" (the code's runs {tag})" if tag else "") + "\n")
        md.append(f"Code: seed(s) {', '.join(map(str, code_seeds)) or 'none'}, rounds logged "
                  f"{', '.join(str(max(code[s])) for s in code_seeds) or '-'}; Bastion: seeds "
                  f"{', '.join(map(str, sorted(ours))) or 'none'}, rounds "
                  f"{', '.join(str(max(ours[s])) for s in sorted(ours)) or '-'}. Rounds shown: up to {last}, "
                  f"the last round every run of the row reached.\n")
        md.append("| " + " | ".join(head) + " |")
        md.append("|" + "---:|" * len(head))
        lines = [(str(r), [r]) for r in marks]
        lines.append((f"mean {last - 4}-{last}", list(range(last - 4, last + 1))))
        for label, rs in lines:
            def val(run, k):
                v = [run[r][k] for r in rs if r in run]
                return statistics.mean(v) if len(v) == len(rs) else None
            cells = [label]
            for k in (0, 1):
                for s in code_seeds:
                    v = val(code[s], k)
                    cells.append("" if v is None else f"{v:.2f}")
                cells.append(mean_sd([v for v in (val(b, k) for b in ours.values()) if v is not None]))
            md.append("| " + " | ".join(cells) + " |")
        md.append("")
        for r in sorted(set().union(*[set(x) for x in every])):
            rec = {"row": spec, "round": r}
            for s in code_seeds:
                if r in code[s]:
                    rec[f"code_A_s{s}"], rec[f"code_R_s{s}"] = (f"{x:.2f}" for x in code[s][r])
            for s, b in ours.items():
                if r in b:
                    rec[f"bastion_A_s{s}"], rec[f"bastion_R_s{s}"] = (f"{x:.2f}" for x in b[r])
            table.append(rec)
    with open(a.out_md, "w") as f:
        f.write("\n".join(md) + "\n")
    cols = ["row", "round"] + sorted({k for rec in table for k in rec} - {"row", "round"})
    with open(a.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(table)


if __name__ == "__main__":
    main()
