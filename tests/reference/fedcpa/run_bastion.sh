#!/usr/bin/env bash
# Bastion's side of the FedCPA reference run: the rows of tests/reference/fedcpa/run_device.sh (FedAvg,
# FedCPA) in the same setting, docs/reproduction/reference/fedcpa/bastion-<row>.toml, one run per seed.
#
# Usage (from the repo root; CPU, no build is made):
#     bash tests/reference/fedcpa/run_bastion.sh OUTDIR
# Knobs (environment variables, all optional):
#   SEEDS          seeds (default "1 2 3")
#   ROWS           rows (default "fedavg fedcpa"; each needs docs/reproduction/reference/fedcpa/bastion-<row>.toml)
#   ROUNDS         rounds (default: the config's, 25 = the device script's default FEDCPA_ROUNDS)
#   THREADS        --threads per run (default 1)
#   BASTION        the binary (default build/bastion)
#   BASTION_DATA   dataset folder (default ../shared/datasets beside the repo)
#   EXTRA_SET      extra "--set key=value" words appended to every run
#   PY             python for the summary, standard library only (default python3)
# Writes OUTDIR/<row>/seed-<S>/ (Bastion's results folder: rounds.csv, summary.json, ...), OUTDIR/rounds.csv
# (row, seed, round, acc, asr, malicious sampled, flagged attackers, flagged benign) and OUTDIR/summary.txt
# (per row and seed: rounds, last-round acc/asr, mean of the last 3; then the mean over seeds). A seed
# whose folder already holds summary.json is not run again.
set -u
ROOT=$(pwd)
OUTDIR=${1:?usage: run_bastion.sh OUTDIR}
SEEDS=${SEEDS:-"1 2 3"}
ROWS=${ROWS:-"fedavg fedcpa"}
ROUNDS=${ROUNDS:-}
THREADS=${THREADS:-1}
BASTION=${BASTION:-$ROOT/build/bastion}
export BASTION_DATA=${BASTION_DATA:-$ROOT/../shared/datasets}
EXTRA_SET=${EXTRA_SET:-}
PY=${PY:-python3}   # only for the summary (standard library)
CONF="$ROOT/docs/reproduction/reference/fedcpa"
[ -x "$BASTION" ] || { echo "no binary $BASTION"; exit 2; }
mkdir -p "$OUTDIR"
START=$(date +%s)
for r in $ROWS; do
  C="$CONF/bastion-$r.toml"
  [ -f "$C" ] || { echo "no config $C"; exit 2; }
  for s in $SEEDS; do
    D="$OUTDIR/$r/seed-$s"
    if [ -f "$D/summary.json" ]; then echo "[$r seed $s] done before, skipped"; continue; fi
    SETS=(--set "seed=$s")
    [ -n "$ROUNDS" ] && SETS+=(--set "rounds=$ROUNDS")
    for x in $EXTRA_SET; do SETS+=(--set "$x"); done
    echo "[$r seed $s] $(date -u +%H:%M:%S)"
    "$BASTION" run "$C" "${SETS[@]}" --threads "$THREADS" --out "$D" --overwrite --quiet || echo "[$r seed $s] FAILED rc=$?"
  done
done

# ---- per-round table and summary (columns by name from Bastion's rounds.csv) ----
{
  echo "row,seed,round,acc,asr,malicious,tp,fp"
  for r in $ROWS; do for s in $SEEDS; do
    F="$OUTDIR/$r/seed-$s/rounds.csv"; [ -f "$F" ] || continue
    awk -F, -v row="$r" -v seed="$s" 'NR==1{for(i=1;i<=NF;i++)c[$i]=i; next}
      {print row "," seed "," $c["round"] "," $c["acc"] "," $c["asr"] "," $c["malicious"] "," $c["tp"] "," $c["fp"]}' "$F"
  done; done
} >"$OUTDIR/rounds.csv"
{
  echo "Bastion $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null), configs docs/reproduction/reference/fedcpa/bastion-<row>.toml, rounds ${ROUNDS:-config}"
  echo "acc, asr in %; mean_last3 = mean of the last 3 rounds; tp/fp = attackers/benign flagged (weight 0) over the run"
  "$PY" - "$OUTDIR/rounds.csv" <<'PYEOF'
import csv, sys
runs, order = {}, []
for d in csv.DictReader(open(sys.argv[1])):
    k = (d["row"], d["seed"])
    if k not in runs:
        runs[k] = []
        order.append(k)
    runs[k].append(d)
num = lambda x: float(x) if x not in ("", None) else float("nan")
cnt = lambda rr, c: sum(int(num(r[c])) for r in rr if r[c] not in ("", None))
agg = {}
for k in order:
    rr = runs[k]
    t = rr[-3:]
    ma, ms = sum(num(r["acc"]) for r in t) / len(t), sum(num(r["asr"]) for r in t) / len(t)
    print(f"{k[0]} seed {k[1]}: rounds={len(rr)} last acc={100 * num(rr[-1]['acc']):.2f} asr={100 * num(rr[-1]['asr']):.2f} "
          f"mean_last{len(t)} acc={100 * ma:.2f} asr={100 * ms:.2f} "
          f"flagged attackers {cnt(rr, 'tp')}/{cnt(rr, 'malicious')} benign {cnt(rr, 'fp')}")
    agg.setdefault(k[0], []).append((ma, ms))
for row, v in agg.items():
    print(f"{row}: mean over {len(v)} seed(s) of mean_last3: acc={100 * sum(a for a, _ in v) / len(v):.2f} "
          f"asr={100 * sum(b for _, b in v) / len(v):.2f}")
PYEOF
  echo "elapsed $(( $(date +%s) - START ))s"
} | tee "$OUTDIR/summary.txt"
