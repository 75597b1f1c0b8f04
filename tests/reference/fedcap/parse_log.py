#!/usr/bin/env python3
"""Turn a stdout log of FedCAP's code (youpengl/FedCAP, system/main.py) into a per-round CSV, and
print the summary line run_device.sh collects.

The code's loop (servers/serveravg.py, serverditto.py, servercap.py) runs global_rounds + 1 iterations
i = 0..R. Iteration i prints "Round number: i", then evaluates the model every client holds before
training ("g": the global model for FedAvg and Ditto, each client's customised model for FedCAP), then,
except in the last iteration, trains and evaluates the locally updated models ("p": FedAvg's client
model after local training = FedAvg-FT, Ditto's and FedCAP's personal models). Each evaluation prints
  Benign Averaged Test Accuracy: <a>%     (g; "Accurancy" in the p block: the code's spelling)
= sum of correct / sum of test samples over the benign clients (sample-weighted), and, with attackers,
  Malicious Averaged Test Accuracy: <a>%
FedCAP also prints, from iteration 1 on, inside its aggregation
  Ours DAcc: <d>%, FPR: <f>%, FNR: <n>%   and   New malicious nodes identified by server: [ids]

CSV columns (one row per iteration i): round (= i, the code's numbering), g, p, g_mal, p_mal, dacc, fpr,
fnr, new_flagged. Bastion's round r (1-based) trains in the code's iteration r - 1: Bastion's p_acc_w at
round r = p[r - 1], its p_racc_w at round r = g[r - 1] (the model received before training), and with
eval.personal_received_final = "next" its final p_racc_w = g[R].

Summary (the figure FedCAP's paper reports, plot/Figure7.py and plot/Table1.py):
  FedAvg-FT: p of the last training iteration, p[R - 1];  FedAvg (global): g[R];
  Ditto, FedCAP: TAcc = max(g[R], p[R - 1]).
"mean of last 3" averages the per-round figure over the last 3 training iterations, where the per-round
TAcc of iteration i is max(g[i + 1], p[i]) (the model sent after that round's aggregation, as the final
one is). A run stopped early (no "Final Report" line) reports the same for the iterations it completed.
"""
import argparse
import csv
import re
import sys

ROUND = re.compile(r"-+Round number: (\d+)-+")
EVAL = re.compile(r"-Evaluate (global|customized|fine-tuned|personalized) models")
BENIGN = re.compile(r"Benign Averaged Test Accura\w*: ([0-9.]+|nan)%")
MAL = re.compile(r"Malicious Averaged Test Accura\w*: ([-0-9.]+|nan)%")
DACC = re.compile(r"Ours DAcc: ([0-9.]+)%, FPR: ([0-9.]+)%, FNR: ([0-9.]+)%")
NEW = re.compile(r"New malicious nodes identified by server: \[(.*)\]")
COLS = ["round", "g", "p", "g_mal", "p_mal", "dacc", "fpr", "fnr", "new_flagged"]


def parse(path):
    rows = {}
    r, kind = None, None
    with open(path, errors="replace") as f:
        for line in f:
            m = ROUND.search(line)
            if m:
                r, kind = int(m.group(1)), None
                rows.setdefault(r, {"round": r})
                continue
            if r is None:
                continue
            m = EVAL.search(line)
            if m:
                kind = "g" if m.group(1) in ("global", "customized") else "p"
                continue
            m = BENIGN.search(line)
            if m and kind:
                rows[r][kind] = float(m.group(1))
                continue
            m = MAL.search(line)
            if m and kind:
                rows[r][kind + "_mal"] = float(m.group(1))
                continue
            m = DACC.search(line)
            if m:
                rows[r].update(dacc=float(m.group(1)), fpr=float(m.group(2)), fnr=float(m.group(3)))
                continue
            m = NEW.search(line)
            if m:
                rows[r]["new_flagged"] = " ".join(x.strip() for x in m.group(1).split(",") if x.strip())
    return [rows[k] for k in sorted(rows)]


def per_round(rows, metric):
    """[(iteration, value)] over the completed training iterations."""
    g = {x["round"]: x.get("g") for x in rows}
    out = []
    for x in rows:
        p = x.get("p")
        if p is None:
            continue
        if metric == "p":
            out.append((x["round"], p))
        else:
            gn = g.get(x["round"] + 1)
            out.append((x["round"], p if gn is None else max(p, gn)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--csv", help="write the per-round CSV here (default: stdout unless --summary)")
    ap.add_argument("--summary", action="store_true", help="print one summary line")
    ap.add_argument("--name", default="")
    ap.add_argument("--metric", choices=["p", "tacc"], default="tacc",
                    help="p: FedAvg-FT (locally updated models); tacc: max(g, p) (Ditto, FedCAP)")
    a = ap.parse_args()
    rows = parse(a.log)
    if a.csv or not a.summary:
        f = open(a.csv, "w", newline="") if a.csv else sys.stdout
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        for x in rows:
            w.writerow({k: x.get(k, "") for k in COLS})
        if a.csv:
            f.close()
    if a.summary:
        pr = per_round(rows, a.metric)
        if not pr:
            print(f"{a.name or a.log}: rounds_logged=0 (no training round completed)")
            return
        trained = len(pr)
        with open(a.log, errors="replace") as f:
            finished = "Final Report" in f.read()
        g_final = rows[-1].get("g") if finished else None
        state = "finished" if finished else "stopped early"
        tail = [v for _, v in pr[-3:]]
        p_last = [x["p"] for x in rows if x.get("p") is not None][-1]
        lab = "FedAvg-FT p" if a.metric == "p" else "TAcc max(g,p)"
        dl = [x for x in rows if "dacc" in x]
        det = f" DAcc={dl[-1]['dacc']:.2f} FPR={dl[-1]['fpr']:.2f} FNR={dl[-1]['fnr']:.2f}" if dl else ""
        gtxt = "" if g_final is None else f" g_final={g_final:.2f}"
        print(f"{a.name or a.log}: rounds_logged={trained} ({state}) {lab}: last={pr[-1][1]:.2f} "
              f"mean_last3={sum(tail) / len(tail):.2f} p_last={p_last:.2f}{gtxt}{det}")


if __name__ == "__main__":
    main()
