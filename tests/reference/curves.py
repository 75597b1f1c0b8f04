#!/usr/bin/env python3
"""Per-round curves of the authors' code beside Bastion's, as one SVG and one CSV (issue 35).

Usage:
  curves.py --out-svg OUT.svg --out-csv OUT.csv --title TITLE
            --panel "TAcc (%)" --series "LABEL|dash|COLUMN|SCALE|OFFSET|FILE[,FILE...]" [--series ...]
            [--panel ... --series ...]

A series is the mean over its files (one per seed) of COLUMN x SCALE at each round, the round read from
the file's `round` column plus OFFSET (the code numbers its rounds from 0, Bastion from 1). `dash` is
"solid" or "dash" (the code's curves dashed by convention). The CSV has one row per panel, series and round:
panel, series, round, mean, min, max, seeds. Rounds missing in some files (a run stopped early) are
averaged over the files that have them; `seeds` says how many. Standard library only.
"""
import argparse
import csv
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def read_series(spec):
    label, dash, column, scale, offset, files = spec.split("|")
    by_round = {}
    for path in files.split(","):
        with open(path) as f:
            for row in csv.DictReader(f):
                value = row.get(column, "")
                if value in ("", "nan", None):
                    continue
                by_round.setdefault(int(row["round"]) + int(offset), []).append(float(value) * float(scale))
    points = {r: (sum(v) / len(v), min(v), max(v), len(v)) for r, v in sorted(by_round.items())}
    return label, dash == "dash", points


def panel_svg(title, series, x0, width, height, rounds):
    left, top, plot_w, plot_h = x0 + 45, 40, width - 60, height - 80
    values = [p[0] for _, _, pts in series for p in pts.values()]
    lo = max(0.0, (min(values) // 10) * 10) if values else 0.0
    hi = min(100.0, (max(values) // 10 + 1) * 10) if values else 100.0
    y = lambda v: top + plot_h * (1 - (v - lo) / (hi - lo))
    out = [f'<text x="{x0 + width / 2}" y="28" text-anchor="middle" font-size="13">{title}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>']
    for tick in range(int(lo), int(hi) + 1, 10 if hi - lo > 20 else 2):
        out.append(f'<text x="{left - 5}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="10">{tick}</text>')
    step = max(1, rounds // 10)
    for tick in range(0, rounds + 1, step):
        x = left + plot_w * tick / rounds
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle" font-size="10">{tick}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 30}" text-anchor="middle" font-size="11">round</text>')
    for k, (label, dashed, pts) in enumerate(series):
        colour = COLOURS[k // 2 % len(COLOURS)] if len(series) > 1 else COLOURS[0]
        line = " ".join(f"{left + plot_w * r / rounds:.1f},{y(v[0]):.1f}" for r, v in pts.items())
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
        ly = top + plot_h + 48 + 14 * k
        out.append(f'<line x1="{left}" y1="{ly - 4}" x2="{left + 24}" y2="{ly - 4}" stroke="{colour}"{dash}/>')
        out.append(f'<text x="{left + 30}" y="{ly}" font-size="11">{label}</text>')
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-svg", required=True)
    parser.add_argument("--out-csv", required=True)
    parser.add_argument("--title", default="")
    parser.add_argument("--panel", action="append", default=[])
    parser.add_argument("--series", action="append", default=[])
    args = parser.parse_args()
    # Series belong to the panel named before them on the command line.
    panels, current = [], None
    argv = sys.argv[1:]
    for i, word in enumerate(argv):
        if word == "--panel":
            current = (argv[i + 1], [])
            panels.append(current)
        elif word == "--series":
            if current is None:
                parser.error("--series before any --panel")
            current[1].append(read_series(argv[i + 1]))
    rounds = max((max(pts) for _, s in panels for _, _, pts in s if pts), default=1)
    width, legend = 460, 14 * max((len(s) for _, s in panels), default=1)
    height = 300 + legend
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width * len(panels)}" height="{height + 20}" '
           f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width * len(panels) / 2}" y="14" text-anchor="middle" font-size="13">{args.title}</text>']
    for k, (title, series) in enumerate(panels):
        svg += panel_svg(title, series, width * k, width, height - legend + 40, rounds)
    svg.append("</svg>")
    with open(args.out_svg, "w") as f:
        f.write("\n".join(svg) + "\n")
    with open(args.out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["panel", "series", "round", "mean", "min", "max", "seeds"])
        for title, series in panels:
            for label, _, pts in series:
                for r, (mean, lo, hi, n) in pts.items():
                    w.writerow([title, label, r, f"{mean:.2f}", f"{lo:.2f}", f"{hi:.2f}", n])


if __name__ == "__main__":
    main()
