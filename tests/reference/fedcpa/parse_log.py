#!/usr/bin/env python3
"""Turn the log file of the FedCPA authors' code (Sungwon-Han/FEDCPA, main_targeted_attack.py; written by
`logging` to <logdir>/<log_file_name>.log, not to stdout) into a per-round CSV.

Lines parsed (one block per communication round r = 0, 1, ...):
  in comm round:<r>
  attacker net <id> final test acc <f> | normal net <id> final test acc <f>   (the round's sampled
                                         parties in ascending id order, i.e. the order of the weights)
  >> Network Weight: <w_1> ... <w_10>    (cpa and foolsgold only: the clients' weights v_i in [0, 1])
  >> Global Model Test accuracy: <f>     -> acc (fraction, clean 10k test set, global model)
  >> Global Model Attack Success Rate: <f> -> asr (fraction; every test image triggered and labelled with
                                            the target, target-class images included)

Columns (fractions, like Bastion's rounds.csv):
  round            the code's round + 1 (Bastion's numbering)
  acc, asr
  attackers        how many of the round's sampled parties are attackers
  attacker_weight  attackers' share of the round's weights, sum_att v / sum v (cpa/foolsgold; empty otherwise)
  attackers_zeroed attackers given weight 0 (excluded from the aggregate) in that round
  benign_zeroed    benign parties given weight 0 in that round
"""
import argparse
import csv
import re
import sys

ROUND = re.compile(r"in comm round:(\d+)")
NET = re.compile(r"(attacker|normal) net (\d+) final test acc")
WEIGHT = re.compile(r">> Network Weight: (.*)$")
ACC = re.compile(r">> Global Model Test accuracy: ([0-9.eE+-]+|nan)")
ASR = re.compile(r">> Global Model Attack Success Rate: ([0-9.eE+-]+|nan)")

COLS = ["round", "acc", "asr", "attackers", "attacker_weight", "attackers_zeroed", "benign_zeroed"]


def parse(path):
    rows, cur = [], None
    with open(path, errors="replace") as f:
        for line in f:
            m = ROUND.search(line)
            if m:
                cur = {"round": int(m.group(1)) + 1, "kinds": [], "w": None, "acc": None, "asr": None}
                rows.append(cur)
                continue
            if cur is None:
                continue
            m = NET.search(line)
            if m:
                cur["kinds"].append(m.group(1) == "attacker")
                continue
            m = WEIGHT.search(line)
            if m:
                try:
                    cur["w"] = [float(x) for x in m.group(1).split()]
                except ValueError:
                    cur["w"] = None
                continue
            m = ACC.search(line)
            if m:
                cur["acc"] = float(m.group(1))
                continue
            m = ASR.search(line)
            if m:
                cur["asr"] = float(m.group(1))
    out = []
    for c in rows:
        if c["acc"] is None and c["asr"] is None:
            continue  # a round cut off before its evaluation
        att = c["kinds"]
        d = {"round": c["round"], "acc": c["acc"], "asr": c["asr"], "attackers": sum(att),
             "attacker_weight": None, "attackers_zeroed": None, "benign_zeroed": None}
        w = c["w"]
        if w is not None and len(w) == len(att):
            s = sum(w)
            d["attacker_weight"] = round(sum(wi for wi, a in zip(w, att) if a) / s, 4) if s > 0 else None
            d["attackers_zeroed"] = sum(1 for wi, a in zip(w, att) if a and wi == 0)
            d["benign_zeroed"] = sum(1 for wi, a in zip(w, att) if not a and wi == 0)
        out.append(d)
    return out


def mean(v):
    v = [x for x in v if x is not None]
    return sum(v) / len(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--csv", help="write the CSV here (default: stdout)")
    ap.add_argument("--summary", action="store_true", help="print one summary line")
    ap.add_argument("--name", default="")
    ap.add_argument("--last", type=int, default=3, help="rounds averaged in the summary (default 3)")
    a = ap.parse_args()
    rows = parse(a.log)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLS)
            w.writeheader()
            w.writerows(rows)
    elif not a.summary:
        w = csv.DictWriter(sys.stdout, fieldnames=COLS)
        w.writeheader()
        w.writerows(rows)
    if a.summary:
        k = a.last
        tail = rows[-k:]
        last = rows[-1] if rows else {}
        pct = lambda x: "nan" if x is None or x != x else f"{100 * x:.2f}"
        aw = [r["attacker_weight"] for r in rows if r["attacker_weight"] is not None and r["attackers"] > 0]
        extra = ""
        if aw:
            za = sum(r["attackers_zeroed"] or 0 for r in rows)
            na = sum(r["attackers"] for r in rows if r["attacker_weight"] is not None)
            zb = sum(r["benign_zeroed"] or 0 for r in rows)
            extra = f" att_w={mean(aw):.3f} attackers_zeroed={za}/{na} benign_zeroed={zb}"
        na = [r["attackers"] for r in rows]
        heavy = f" attackers/round max={max(na)} rounds_with>=3={sum(1 for n in na if n >= 3)}" if na else ""
        print(f"{a.name or a.log}: rounds_logged={len(rows)} last_round={last.get('round')} "
              f"acc={pct(last.get('acc'))} asr={pct(last.get('asr'))} "
              f"mean_last{len(tail)}: acc={pct(mean([r['acc'] for r in tail]))} "
              f"asr={pct(mean([r['asr'] for r in tail]))}{extra}{heavy}")


if __name__ == "__main__":
    main()
