#!/usr/bin/env bash
# Bastion's side of the FedCAP reference run (docs/reproduction/reference/fedcap/README.md): the same
# rows, data, clients, attackers and schedule as tests/reference/fedcap/run_device.sh runs with the
# authors' code, for seeds 1 2 3 (Bastion seed S = the code's --seed S: make_wisdm_npz.py lays the
# code's files out from Bastion's partition and attackers of seed S).
#
# Usage (from the repo root; uses the existing build/bastion, builds nothing):
#     bash tests/reference/fedcap/run_bastion.sh
# Knobs (environment variables):
#   SEEDS     seeds (default "1 2 3")
#   ROWS      rows = TOML names in docs/reproduction/reference/fedcap/ (default: all six)
#   ROUNDS    rounds (default: the file's 100)
#   RESULTS   results folder (default results/fedcap-ref); each run in RESULTS/<row>-s<seed>
#   BASTION   binary (default build/bastion); BASTION_DATA defaults to ../shared/datasets if unset
#   THREADS   --threads (default 1)
# Cost measured on the 2-core dev box: 0.2-0.8 s a round (FedAvg-FT to FedCAP), so 0.5-1.5 min a run,
# about 20-25 min for 6 rows x 3 seeds on one core.
set -u
ROOT=$(pwd)
CFG="$ROOT/docs/reproduction/reference/fedcap"
SEEDS=${SEEDS:-"1 2 3"}
ROWS=${ROWS:-"fedavgft-sf ditto-sf fedcap-sf ditto01-sf fedavgft-none fedcap-none"}
RESULTS=${RESULTS:-results/fedcap-ref}
BASTION=${BASTION:-build/bastion}
THREADS=${THREADS:-1}
export BASTION_DATA=${BASTION_DATA:-$ROOT/../shared/datasets}
[ -x "$BASTION" ] || { echo "no $BASTION (build first)"; exit 2; }
mkdir -p "$RESULTS"
for s in $SEEDS; do
  for r in $ROWS; do
    [ -f "$CFG/$r.toml" ] || { echo "no $CFG/$r.toml"; continue; }
    D="$RESULTS/$r-s$s"
    EXTRA=()
    [ -n "${ROUNDS:-}" ] && EXTRA+=(--set "rounds=$ROUNDS")
    echo "[$r seed $s] -> $D"
    if [ -f "$D/summary.json" ]; then echo "  done already"; continue; fi
    "$BASTION" run "$CFG/$r.toml" --set "seed=$s" "${EXTRA[@]}" --threads "$THREADS" --out "$D" \
      --quiet $( [ -d "$D" ] && echo --resume ) >"$RESULTS/$r-s$s.log" 2>&1 \
      || { echo "  failed: see $RESULTS/$r-s$s.log"; tail -3 "$RESULTS/$r-s$s.log"; }
  done
done

# Summary in the code's terms (tests/reference/fedcap/parse_log.py): FedAvg-FT rows p_acc_w (the
# locally updated models, sample-weighted); Ditto/FedCAP rows TAcc = max(p_acc_w, p_racc_w) with the
# final p_racc_w the model sent after the last aggregation (summary.json p_tacc). "mean_last3" averages,
# over the last 3 rounds r, p_acc_w[r] or max(p_acc_w[r], p_racc_w[r + 1]) (the model sent after round r;
# the final one for the last round), as parse_log.py does for the code's log.
python3 - "$RESULTS" $SEEDS -- $ROWS <<'EOF' | tee "$RESULTS/summary.txt"
import csv, json, os, sys
res = sys.argv[1]
i = sys.argv.index("--")
seeds, rows = sys.argv[2:i], sys.argv[i + 1:]
print("Bastion, FedCAP reference rows (accuracy %, benign clients, sample-weighted)")
for s in seeds:
    for r in rows:
        d = os.path.join(res, f"{r}-s{s}")
        try:
            rr = list(csv.DictReader(open(os.path.join(d, "rounds.csv"))))
            sm = json.load(open(os.path.join(d, "summary.json")))
        except OSError:
            print(f"{r} seed {s}: no results")
            continue
        f = lambda x, k: float(x[k]) * 100 if x.get(k) not in (None, "") else None
        ft = r.startswith("fedavgft")
        per = []
        for j, x in enumerate(rr):
            p = f(x, "p_acc_w")
            if p is None:
                continue
            if ft:
                per.append(p)
            else:
                nxt = f(rr[j + 1], "p_racc_w") if j + 1 < len(rr) else f(x, "p_racc_w")
                per.append(p if nxt is None else max(p, nxt))
        tail = per[-3:]
        last = per[-1] if per else float("nan")
        tacc = sm.get("mean", {}).get("p_tacc")
        extra = "" if ft or tacc is None else f" p_tacc(summary)={100 * float(tacc):.2f}"
        x = rr[-1] if rr else {}
        det = ""
        if x.get("client_dacc") not in (None, "") and r == "fedcap-sf":
            det = f" DAcc={100 * float(x['client_dacc']):.2f} FPR={100 * float(x['client_fpr']):.2f} FNR={100 * float(x['client_fnr']):.2f}"
        lab = "FedAvg-FT p_acc_w" if ft else "TAcc max(p_acc_w,p_racc_w)"
        print(f"{r} seed {s}: rounds={len(rr)} {lab}: last={last:.2f} "
              f"mean_last3={sum(tail) / max(len(tail), 1):.2f}{extra}{det}")
EOF
