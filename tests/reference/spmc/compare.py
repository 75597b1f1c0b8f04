#!/usr/bin/env python3
"""Puts the SPMC authors' code's per-round curves (parse_log.py CSVs) beside Bastion's rounds.csv.

Usage: compare.py --row NAME CODE_CSV BASTION_ROUNDS_CSV [--row ...] --csv OUT.csv --svg OUT.svg

The code numbers its rounds from 0 and logs acc / asr in percent; Bastion numbers them from 1 and writes
fractions. Both ASRs count every triggered test image, target class included (the code's metric;
spmc-fmnist-backdoor.toml sets eval.asr_include_target), and R = 100 - ASR. Standard library only.
"""
import argparse
import csv


def read_code(path):
    with open(path) as f:
        return {int(r["round"]) + 1: (float(r["acc"]), float(r["R"])) for r in csv.DictReader(f)}


def read_bastion(path):
    with open(path) as f:
        return {int(r["round"]): (100 * float(r["acc"]), 100 * (1 - float(r["asr"]))) for r in csv.DictReader(f)}


COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def panel(rows, index, title, x0, width, height, rounds):
    """One chart: metric `index` (0 = A, 1 = R) of every row, code dashed, Bastion solid."""
    left, top, plot_w, plot_h = x0 + 45, 30, width - 60, height - 70
    out = [f'<text x="{x0 + width / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>']
    for tick in range(0, 101, 20):
        y = top + plot_h * (1 - tick / 100)
        out.append(f'<text x="{left - 5}" y="{y + 4}" text-anchor="end" font-size="10">{tick}</text>')
    for tick in range(0, rounds + 1, 10):
        x = left + plot_w * tick / rounds
        out.append(f'<text x="{x}" y="{top + plot_h + 14}" text-anchor="middle" font-size="10">{tick}</text>')
    for k, (name, code, ours) in enumerate(rows):
        for series, dash in ((code, ' stroke-dasharray="5,3"'), (ours, "")):
            points = " ".join(f"{left + plot_w * r / rounds:.1f},{top + plot_h * (1 - v[index] / 100):.1f}"
                              for r, v in sorted(series.items()))
            out.append(f'<polyline points="{points}" fill="none" stroke="{COLOURS[k % 4]}" stroke-width="1.5"{dash}/>')
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--row", nargs=3, action="append", metavar=("NAME", "CODE_CSV", "BASTION_CSV"), required=True)
    parser.add_argument("--csv", required=True)
    parser.add_argument("--svg", required=True)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    rows = [(name, read_code(code), read_bastion(ours)) for name, code, ours in args.row]
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["row", "round", "code_A", "code_R", "bastion_A", "bastion_R"])
        for name, code, ours in rows:
            for r in sorted(set(code) | set(ours)):
                c, b = code.get(r), ours.get(r)
                writer.writerow([name, r] + ([f"{c[0]:.2f}", f"{c[1]:.2f}"] if c else ["", ""])
                                + ([f"{b[0]:.2f}", f"{b[1]:.2f}"] if b else ["", ""]))
    width, height = 900, 330
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>']
    svg += panel(rows, 0, "A: clean accuracy (%)", 0, width / 2, height, args.rounds)
    svg += panel(rows, 1, "R = 100 - ASR (%)", width / 2, width / 2, height, args.rounds)
    for k, (name, _, _) in enumerate(rows):
        x = 60 + k * 200
        svg.append(f'<line x1="{x}" y1="{height - 12}" x2="{x + 25}" y2="{height - 12}" stroke="{COLOURS[k % 4]}" stroke-width="2"/>')
        svg.append(f'<text x="{x + 30}" y="{height - 8}" font-size="11">{name}</text>')
    svg.append(f'<text x="{width - 10}" y="{height - 8}" text-anchor="end" font-size="11">dashed: authors\' code; solid: Bastion</text>')
    svg.append("</svg>")
    with open(args.svg, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
