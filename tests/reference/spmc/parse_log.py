#!/usr/bin/env python3
"""Turn a stdout log of the SPMC authors' code (WenddHe0119/SPMC, RobustFederation/main.py)
into a per-round CSV.

Lines parsed (utils/training.py, one pair per communication round, global model):
  [TEST] The <r> Epoch: Acc:<a> Optim:... Server:...                 -> acc  (clean test top-1, %)
  [ROBUST] The <r> Epoch: attack success rate:<s> Optim:... Server:... -> asr  (%)
and the aggregation weights printed by the server each round:
  --------
  [<online client ids, random order>]
  [<weights in that order>]          (None for servers that return nothing, e.g. RLR, Bulyan)
  --------

Columns: round, acc, asr, R, attacker_weight
  acc = SPMC paper's A (main-task accuracy on the clean 10k test set).
  asr = the code's "attack success rate": top-1 accuracy w.r.t. the target label 2 on ALL
        10k test images with the trigger (target-class images included, so a clean model
        still scores ~10 %).
  R   = 100 - asr = the paper's "backdoor failure rate" R = 1 - ASR (analysis.py also
        reports 100 - attack_success_rate). It is NOT the accuracy on the true labels.
  attacker_weight = total aggregation weight of the malicious clients (the last
        int(10*gamma) ids, i.e. 8 and 9 at gamma 0.2) when the server prints weights.
The paper's table entries are the means over the last 5 rounds (analysis.py: mean of last five).
"""
import argparse
import ast
import csv
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
ACC = re.compile(r"\[TEST\] The (\d+) Epoch: Acc:([0-9.]+)")
ASR = re.compile(r"\[ROBUST\] The (\d+) Epoch: attack success rate:([0-9.]+)")


def parse(path, n_clients=10, gamma=0.2):
    bad = set(range(n_clients - int(n_clients * gamma), n_clients))
    rows = {}
    pending = None  # attacker weight share of the block printed before the round's [TEST] line
    with open(path, errors="replace") as f:
        lines = [ANSI.sub("", l).rstrip("\n") for l in f.read().replace("\r", "\n").split("\n")]
    for i, line in enumerate(lines):
        m = ACC.search(line)
        if m:
            d = rows.setdefault(int(m.group(1)), {})
            d["acc"] = float(m.group(2))
            d["aw"], pending = pending, None
            continue
        m = ASR.search(line)
        if m:
            rows.setdefault(int(m.group(1)), {})["asr"] = float(m.group(2))
            continue
        if line.strip() == "--------" and i + 2 < len(lines) and lines[i + 1].lstrip().startswith("["):
            # numpy may wrap the weight array over several lines: read up to the closing "--------"
            j = i + 2
            chunk = []
            while j < len(lines) and lines[j].strip() != "--------" and j < i + 40:
                chunk.append(lines[j].strip())
                j += 1
            if j >= len(lines) or lines[j].strip() != "--------":
                continue
            try:
                ids = ast.literal_eval(lines[i + 1].strip())
            except (ValueError, SyntaxError):
                continue
            w = " ".join(chunk)
            if w == "None" or not isinstance(ids, list):
                continue
            try:
                w = [float(x) for x in w.replace("[", " ").replace("]", " ").replace(",", " ").split()]
            except ValueError:
                continue
            if len(ids) == len(w):
                pending = sum(wi for c, wi in zip(ids, w) if c in bad) / max(sum(w), 1e-12)
    out = []
    for r in sorted(rows):
        d = rows[r]
        aw = d.get("aw")
        asr = d.get("asr")
        out.append({"round": r, "acc": d.get("acc"), "asr": asr,
                    "R": None if asr is None else round(100.0 - asr, 2),
                    "attacker_weight": None if aw is None else round(aw, 4)})
    return out


def last5(rows, key):
    v = [r[key] for r in rows if r[key] is not None][-5:]
    return (sum(v) / len(v), len(v)) if v else (float("nan"), 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--csv", help="write CSV here (default: stdout)")
    ap.add_argument("--summary", action="store_true", help="print one summary line")
    ap.add_argument("--name", default="")
    ap.add_argument("--gamma", type=float, default=0.2)
    a = ap.parse_args()
    rows = parse(a.log, gamma=a.gamma)
    cols = ["round", "acc", "asr", "R", "attacker_weight"]
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
    elif not a.summary:
        w = csv.DictWriter(sys.stdout, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    if a.summary:
        acc, n = last5(rows, "acc")
        R, _ = last5(rows, "R")
        aw = [r["attacker_weight"] for r in rows if r["attacker_weight"] is not None][-5:]
        aws = f" attacker_w(last5)={sum(aw) / len(aw):.5f}" if aw else ""
        last = rows[-1] if rows else {}
        print(f"{a.name or a.log}: rounds_logged={len(rows)} A(last{n})={acc:.2f} R(last{n})={R:.2f} "
              f"last_round={last.get('round')} acc={last.get('acc')} asr={last.get('asr')}{aws}")


if __name__ == "__main__":
    main()
