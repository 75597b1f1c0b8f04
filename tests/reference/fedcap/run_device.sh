#!/usr/bin/env bash
# Run FedCAP's authors' code (github.com/youpengl/FedCAP @ 424fb96, PFLlib-based) in its WISDM setting
# (36 users, all every round, 30 % = 10 attackers, 100 rounds, 5 local epochs, batch 10, SGD lr 0.01),
# rows FedAvg-FT, Ditto and FedCAP under sign-flip (A4), and FedAvg-FT / FedCAP without attack, on the
# WISDM ARFF features laid out with Bastion's exact clients, splits and attackers
# (tests/reference/fedcap/make_wisdm_npz.py). One patched line: the WISDM model is Bastion's
# 43-200-200-6 MLP instead of HARCNN, since the raw windows HARCNN needs are not available
# (docs/reproduction/reference/fedcap/README.md).
#
# Device usage (from the repo root, carry [".ref"]):
#     bash tests/reference/fedcap/run_device.sh
# Needs .ref/fedcap/{code,data/wisdm-s<SEED>}. No network is used.
#
# Knobs (environment variables, all optional):
#   OUT               output folder (default /tmp/out); exactly two files are written there:
#                     fedcap-logs.tar.gz and fedcap-summary.txt
#   PY                python interpreter (default python3)
#   FEDCAP_ROWS       rows (default "fedavgft-sf ditto-sf fedcap-sf ditto01-sf fedavgft-none fedcap-none")
#   FEDCAP_SEEDS      seeds (default "1 2 3"; the code's --seed = Bastion's seed; data/wisdm-s<seed> must exist)
#   FEDCAP_DEADLINE_S wall seconds from script start after which every run still going is stopped and
#                     what it logged is packed (default 400)
#   FEDCAP_ROUNDS     --global_rounds (default 100 = the code's default)
#   FEDCAP_DEVICE     --device for the code: cpu (default) or cuda. The model is a 43-200-200-6 MLP
#                     trained in batches of 10: every step is a few microsecond-sized ops, so a run is
#                     bound by Python and kernel-launch latency and the GPU cannot speed it up (README)
#   FEDCAP_THREADS    OMP/MKL threads per run (default 1; at most 3 when sharing the machine)
#   FEDCAP_PAR        runs at the same time (default 6); the rest wait in a queue, seed by seed, so
#                     seed 1's rows start first and later seeds fill the time left before the deadline
#   FEDCAP_WORK       scratch folder (default /tmp/fedcap_work)
set -u
START=$(date +%s)
ROOT=$(pwd)
REF="$ROOT/.ref/fedcap"
OUT=${OUT:-/tmp/out}
PY=${PY:-python3}
ROWS=${FEDCAP_ROWS:-"fedavgft-sf ditto-sf fedcap-sf ditto01-sf fedavgft-none fedcap-none"}
SEEDS=${FEDCAP_SEEDS:-"1 2 3"}
DEADLINE=${FEDCAP_DEADLINE_S:-400}
ROUNDS=${FEDCAP_ROUNDS:-100}
DEVICE=${FEDCAP_DEVICE:-cpu}
THREADS=${FEDCAP_THREADS:-1}
PAR=${FEDCAP_PAR:-6}
WORK=${FEDCAP_WORK:-/tmp/fedcap_work}
PATCH="$ROOT/docs/reproduction/reference/fedcap/code.patch"
PARSE="$ROOT/tests/reference/fedcap/parse_log.py"
mkdir -p "$OUT" "$WORK"
rm -rf "$WORK/logs"; LOGS="$WORK/logs"; mkdir -p "$LOGS"
[ -f "$REF/code/system/main.py" ] || { echo "missing $REF/code (carry .ref)"; exit 2; }

# ---- modules the code imports that the device image lacks: wandb, omegaconf, hdmedians ----
# None is used on the path run here: wandb only inside try/except (serverbase.evaluate*) and in the
# wandb modes, OmegaConf only in --mode sweep_wandb, hdmedians.geomedian only in --aggregation rfa.
# So no-op stand-ins are written (no pip, no network); a real module is used where one is installed.
DEPS="$WORK/deps"; rm -rf "$DEPS"; mkdir -p "$DEPS"
if ! "$PY" -c "import wandb" 2>/dev/null; then
  printf '# stand-in: FedCAP calls wandb only inside try/except or in the wandb modes\n' >"$DEPS/wandb.py"
  echo "wandb: stand-in module" >>"$LOGS/deps.txt"
fi
if ! "$PY" -c "import omegaconf" 2>/dev/null; then
  printf 'class OmegaConf:\n    @staticmethod\n    def load(*a, **k):\n        raise RuntimeError("omegaconf stand-in: sweep mode unavailable")\n' >"$DEPS/omegaconf.py"
  echo "omegaconf: stand-in module" >>"$LOGS/deps.txt"
fi
if ! "$PY" -c "import hdmedians" 2>/dev/null; then
  printf 'def geomedian(*a, **k):\n    raise RuntimeError("hdmedians stand-in: --aggregation rfa unavailable")\n' >"$DEPS/hdmedians.py"
  echo "hdmedians: stand-in module" >>"$LOGS/deps.txt"
fi
export PYTHONPATH="$DEPS${PYTHONPATH:+:$PYTHONPATH}"

# ---- pristine code copy + the one-line model patch ----
SRC="$WORK/src"; rm -rf "$SRC"; mkdir -p "$SRC"
cp -r "$REF/code/." "$SRC/"
if command -v patch >/dev/null 2>&1; then
  (cd "$SRC" && patch -p1 --forward <"$PATCH") >"$LOGS/patch.txt" 2>&1
else  # no patch(1) in the image: apply the zero-context, one-line-per-hunk patch with Python
  "$PY" - "$SRC" "$PATCH" >"$LOGS/patch.txt" 2>&1 <<'PYEOF'
import re, sys
src, lines, f, i = sys.argv[1], open(sys.argv[2]).read().split("\n"), None, 0
files = {}
while i < len(lines):
    l = lines[i]
    if l.startswith("+++ b/"):
        f = l[6:]; files.setdefault(f, [])
    m = re.match(r"@@ -(\d+) \+(\d+) @@", l)
    if m:
        files[f].append((int(m.group(1)), lines[i + 1][1:], lines[i + 2][1:])); i += 2
    i += 1
for f, hunks in files.items():
    text = open(f"{src}/{f}").read().split("\n")
    for n, old, new in hunks:
        assert text[n - 1] == old, (f, n, text[n - 1])
        text[n - 1] = new
    open(f"{src}/{f}", "w").write("\n".join(text))
    print("patched (python)", f, len(hunks), "lines")
PYEOF
fi
[ $? -eq 0 ] || { echo "patch failed"; cat "$LOGS/patch.txt"; exit 4; }

# ---- environment record ----
{ date -u; hostname; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1;
  "$PY" -c "import sys,torch,numpy,sklearn;print(sys.version);print('torch',torch.__version__,'cuda',torch.version.cuda,torch.cuda.is_available(),'numpy',numpy.__version__,'sklearn',sklearn.__version__)";
  nproc; echo "rows=$ROWS seeds=$SEEDS rounds=$ROUNDS device=$DEVICE threads=$THREADS par=$PAR deadline=$DEADLINE";
  echo "code: $(cat "$REF/COMMIT" 2>/dev/null)"; } >"$LOGS/env.txt" 2>&1

# ---- rows: name -> main.py arguments (experiments/Figure7.sh, Table1.sh: WISDM) and summary metric ----
row_args() {
  case "$1" in
    fedavgft-sf)   echo "--algorithm FedAvg --attack_type A4 --attack_ratio 0.3" ;;
    ditto-sf)      echo "--algorithm Ditto --attack_type A4 --attack_ratio 0.3 --lamda 0.01" ;;
    ditto01-sf)    echo "--algorithm Ditto --attack_type A4 --attack_ratio 0.3 --lamda 0.1" ;;
    fedcap-sf)     echo "--algorithm FedCAP --attack_type A4 --attack_ratio 0.3 --alpha 2 --phi 0.2 --lamda 0.1" ;;
    fedavgft-none) echo "--algorithm FedAvg --attack_type B --attack_ratio 0.0" ;;
    ditto-none)    echo "--algorithm Ditto --attack_type B --attack_ratio 0.0 --lamda 0.1" ;;
    fedcap-none)   echo "--algorithm FedCAP --attack_type B --attack_ratio 0.0 --alpha 2 --phi 0.1 --lamda 0.1" ;;
    *) return 1 ;;
  esac
}
row_metric() { case "$1" in fedavgft-*) echo p ;; *) echo tacc ;; esac; }

export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
JOBS=""
for s in $SEEDS; do for r in $ROWS; do JOBS="$JOBS $r@$s"; done; done
RCFILE="$LOGS/exit-codes.txt"; : >"$RCFILE"

launch() {  # $1 = row@seed
  local r=${1%@*} s=${1#*@} A D LEFT
  A=$(row_args "$r") || { echo "unknown row $r" | tee -a "$RCFILE"; return; }
  [ -d "$REF/data/wisdm-s$s" ] || { echo "$r@$s: no data/wisdm-s$s" | tee -a "$RCFILE"; return; }
  D="$WORK/run-$r-s$s"; rm -rf "$D"; mkdir -p "$D/dataset/processed"
  ln -s "$SRC/system" "$D/system"
  ln -s "$REF/data/wisdm-s$s" "$D/dataset/processed/wisdm"   # main.py: data_path = dataset/processed/wisdm
  LEFT=$(( DEADLINE - ($(date +%s) - START) ))
  if [ "$LEFT" -lt 30 ]; then echo "$r@$s: not started (deadline)" >>"$RCFILE"; return; fi
  echo "[$r seed $s] $A (wall cap ${LEFT}s)"
  ( cd "$D" && timeout --signal=TERM --kill-after=10 "$LEFT" \
      "$PY" -u system/main.py --device "$DEVICE" --device_id 0 --seed "$s" --dataset wisdm \
      --global_rounds "$ROUNDS" $A; echo "$r@$s rc=$?" >>"$RCFILE" ) >"$LOGS/fedcap-$r-s$s.log" 2>&1 &
}

for j in $JOBS; do
  while [ "$(jobs -rp | wc -l)" -ge "$PAR" ]; do sleep 1; done
  launch "$j"
done
wait
echo "all runs ended after $(( $(date +%s) - START ))s (rc 124 = stopped at the deadline)" | tee -a "$RCFILE"

# ---- summary ----
SUM="$OUT/fedcap-summary.txt"
{
  echo "FedCAP authors' code 424fb96 (+ model patch: 43-200-200-6 MLP), WISDM ARFF features, Bastion's partition/attackers"
  echo "rounds requested=$ROUNDS seeds=$SEEDS device=$DEVICE; accuracy = benign clients, sample-weighted (%)"
  echo "FedAvg-FT rows: p (locally updated models); Ditto/FedCAP rows: TAcc = max(g, p) (plot/Figure7.py)"
  for s in $SEEDS; do for r in $ROWS; do
    L="$LOGS/fedcap-$r-s$s.log"; [ -f "$L" ] || continue
    "$PY" "$PARSE" "$L" --csv "$LOGS/fedcap-$r-s$s.csv" --summary --metric "$(row_metric "$r")" --name "$r seed $s" 2>&1
  done; done
  echo "exit codes: $(grep -o 'rc=[0-9]*' "$RCFILE" | sort | uniq -c | tr '\n' ' '); not started (deadline): $(grep -c 'not started' "$RCFILE")"
  echo "elapsed $(( $(date +%s) - START ))s"
} | tee "$SUM"

# ---- the code's own result files (written only when a run finishes) ----
for d in "$WORK"/run-*; do
  [ -d "$d/results" ] && mkdir -p "$LOGS/results" && cp -r "$d/results/." "$LOGS/results/"
done
for s in $SEEDS; do cp "$REF/data/wisdm-s$s/mapping.json" "$LOGS/mapping-s$s.json" 2>/dev/null; done
tar -czf "$OUT/fedcap-logs.tar.gz" -C "$WORK" logs
ls -la "$OUT"
