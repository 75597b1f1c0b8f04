#!/usr/bin/env bash
# Run the FedCPA authors' code (github.com/Sungwon-Han/FEDCPA @ ec43803, main_targeted_attack.py) in
# FedCPA's own federated setting on Fashion-MNIST with LeNet (Bastion's configs/defenses/fedcpa-fmnist-own.toml):
# rows FedAvg (--global_defense average) and FedCPA (--global_defense cpa), both at once, one GPU.
#
# Device usage (from the repo root, carry [".ref"]):
#     bash tests/reference/fedcpa/run_device.sh
# Needs .ref/fedcpa/{code,wheels/geom_median-0.1.0.tar.gz} and .ref/spmc/data/FashionMNIST/raw/*.gz
# (see docs/reproduction/reference/fedcpa/README.md). No network is used.
# The code has no Fashion-MNIST branch: docs/reproduction/reference/fedcpa/code.patch adds one (dataset,
# LeNet) to a scratch copy; the aggregation, attack, training and logging code is not touched.
#
# Writes exactly two files into $OUT: fedcpa-logs.tar.gz and fedcpa-summary.txt.
#
# Knobs (environment variables, all optional):
#   OUT                 output folder (default /tmp/out)
#   PY                  python interpreter (default python3)
#   FEDCPA_ROWS         rows to run (default "fedavg fedcpa"; any --global_defense name also works,
#                       e.g. median, krum, trimmed_mean, norm, foolsgold, rfa)
#   FEDCPA_DEADLINE_S   wall seconds from script start by which the two files are written (default 400):
#                       every run still going at DEADLINE - 20 s is stopped (TERM) and what it logged is packed
#   FEDCPA_ROUNDS       --comm_round (default 25; the code's default is 100, Bastion's own-setting preset 50)
#   FEDCPA_SEED         --init_seed (default 1; the code's default is 0)
#   FEDCPA_SEEDS        several seeds, each row once per seed, all at once (default: FEDCPA_SEED). Not tried
#                       on the GPU: more processes share the one GPU by time slicing; lower FEDCPA_THREADS
#   FEDCPA_PARTIES      --n_parties (default 20 = the code's default)
#   FEDCPA_THREADS      CPU threads per run (OMP_NUM_THREADS / MKL_NUM_THREADS; default 4)
#   FEDCPA_EXTRA_ARGS   extra argparse options appended to every run
#   FEDCPA_WORK         scratch folder (default /tmp/fedcpa_work)
#   FEDCPA_CPU          1 = CPU smoke test: the code's hard-wired .cuda() calls become no-ops through a
#                       wrapper (the code itself is not changed); default 0 (GPU)
set -u
START=$(date +%s)
ROOT=$(pwd)
REF="$ROOT/.ref/fedcpa"
FMNIST_GZ="$ROOT/.ref/spmc/data/FashionMNIST/raw"
OUT=${OUT:-/tmp/out}
PY=${PY:-python3}
ROWS=${FEDCPA_ROWS:-"fedavg fedcpa"}
DEADLINE=${FEDCPA_DEADLINE_S:-400}
ROUNDS=${FEDCPA_ROUNDS:-25}
SEED=${FEDCPA_SEED:-1}
SEEDS=${FEDCPA_SEEDS:-$SEED}
PARTIES=${FEDCPA_PARTIES:-20}
THREADS=${FEDCPA_THREADS:-4}
EXTRA=${FEDCPA_EXTRA_ARGS:-}
WORK=${FEDCPA_WORK:-/tmp/fedcpa_work}
CPU=${FEDCPA_CPU:-0}
PATCH="$ROOT/docs/reproduction/reference/fedcpa/code.patch"
PARSE="$ROOT/tests/reference/fedcpa/parse_log.py"
PACK_MARGIN=20   # seconds kept after the runs' wall cap for parsing and packing
mkdir -p "$OUT" "$WORK"
rm -rf "$WORK/logs"; LOGS="$WORK/logs"; mkdir -p "$LOGS"
SUM="$OUT/fedcpa-summary.txt"

pack() {
  tar -czf "$OUT/fedcpa-logs.tar.gz" -C "$WORK" logs 2>/dev/null
  ls -la "$OUT"
}
fail() {   # still leave the two files behind
  echo "FAILED: $*" | tee -a "$LOGS/env.txt"
  { echo "FedCPA reference run FAILED before training: $*"; echo "see fedcpa-logs.tar.gz: logs/env.txt, logs/patch.txt"; } >"$SUM"
  pack; exit "${2:-2}"
}
[ -f "$REF/code/main_targeted_attack.py" ] || fail "missing $REF/code (carry .ref)"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -s "$FMNIST_GZ/$f.gz" ] || fail "missing $FMNIST_GZ/$f.gz (carry .ref)"
done

# ---- python dependency missing on the device image: geom_median (pure python, sdist only on PyPI) ----
# defense_utils.py imports it at module level (used only by the rfa rule); unpacked, no pip.
DEPS="$WORK/deps"; rm -rf "$DEPS"; mkdir -p "$DEPS"
export PYTHONPATH="$DEPS${PYTHONPATH:+:$PYTHONPATH}"
tar -xzf "$REF"/wheels/geom_median-0.1.0.tar.gz -C "$DEPS" --strip-components=2 geom_median-0.1.0/src/geom_median \
  && echo "geom_median: unpacked from geom_median-0.1.0.tar.gz (src/geom_median)" >>"$LOGS/deps.txt"

# ---- one python start for the import check and the environment record ----
# std_mean_unbiased: whether this torch still takes torch.std_mean(..., unbiased=False, dim=0) (see below)
{ date -u; hostname; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -3
  echo "nproc $(nproc)"; } >"$LOGS/env.txt" 2>&1
"$PY" - >>"$LOGS/env.txt" 2>>"$LOGS/deps.txt" <<'PYEOF'
import sys, torch, torchvision, numpy, scipy, scipy.stats, sklearn, sklearn.metrics, PIL, geom_median.torch
print(sys.version.split()[0], sys.executable)
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "tv", torchvision.__version__, "np", numpy.__version__,
      "scipy", scipy.__version__, "sklearn", sklearn.__version__, "PIL", PIL.__version__)
try:
    torch.std_mean(torch.ones(3, 2), unbiased=False, dim=0)
    print("std_mean_unbiased ok")
except Exception as e:
    print("std_mean_unbiased refused:", type(e).__name__)
PYEOF
[ $? -eq 0 ] || fail "python deps unavailable (logs/deps.txt)" 3

# ---- pristine code copy + the Fashion-MNIST patch ----
SRC="$WORK/src"; rm -rf "$SRC"; mkdir -p "$SRC"
cp -r "$REF/code/." "$SRC/"
rm -rf "$SRC/figure"
(cd "$SRC" && patch -p1 --forward <"$PATCH") >"$LOGS/patch.txt" 2>&1 || fail "patch failed" 4
# defense_utils.get_update_static (the cpa rule) calls torch.std_mean(..., unbiased=False, dim=0), the
# pre-2.0 spelling. Only if this torch refuses it, spell it correction=0 (the same population std).
if grep -q "std_mean_unbiased refused" "$LOGS/env.txt"; then
  sed -i 's/torch.std_mean(model_weight_cat, unbiased=False, dim=0)/torch.std_mean(model_weight_cat, correction=0, dim=0)/' "$SRC/defense_utils.py"
  echo "torch.std_mean(unbiased=) refused by this torch: defense_utils.py respelled with correction=0" | tee -a "$LOGS/patch.txt"
fi
if [ "$CPU" = 1 ]; then
  # CPU smoke test only: make .cuda() a no-op and run the script unchanged through runpy.
  # --device stays cuda:0 so that utils.compute_accuracy takes its (now no-op) cuda branch: its cpu branch
  # compares a torch.device with the string 'cpu', which is False, and then has no loss function.
  cat >"$SRC/cpu_shim.py" <<'EOF'
import runpy, sys, torch
torch.Tensor.cuda = lambda self, *a, **k: self
torch.nn.Module.cuda = lambda self, *a, **k: self
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
EOF
  ENTRY="cpu_shim.py main_targeted_attack.py"
else
  ENTRY="main_targeted_attack.py"
fi

# ---- data: torchvision FashionMNIST layout, uncompressed (so no download is attempted) ----
DATA="$WORK/data/FashionMNIST/raw"; mkdir -p "$DATA"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -s "$DATA/$f" ] || gunzip -c "$FMNIST_GZ/$f.gz" >"$DATA/$f"
done

{ echo "code: Sungwon-Han/FEDCPA ec43803 + code.patch (sha256 $(sha256sum "$PATCH" | cut -c1-16))"
  echo "rows=$ROWS rounds=$ROUNDS seeds=$SEEDS parties=$PARTIES threads=$THREADS deadline=$DEADLINE cpu=$CPU extra=$EXTRA"
  echo "setup took $(( $(date +%s) - START ))s"; } >>"$LOGS/env.txt"

row_defense() {
  case "$1" in
    fedavg) echo average ;;   # unweighted mean of the round's state dicts
    fedcpa) echo cpa ;;
    *) echo "$1" ;;           # any other --global_defense name
  esac
}

export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
PIDS=""
RUNS=""
for s in $SEEDS; do for row in $ROWS; do
  r="$row-s$s"; RUNS="$RUNS $r"
  G=$(row_defense "$row")
  D="$WORK/run-$r"; rm -rf "$D"; mkdir -p "$D"
  cp -r "$SRC/." "$D/"
  NOW=$(date +%s); LEFT=$(( DEADLINE - PACK_MARGIN - (NOW - START) ))
  [ "$LEFT" -lt 20 ] && LEFT=20
  echo "[$r] --global_defense $G  (wall cap ${LEFT}s)" | tee -a "$LOGS/env.txt"
  # every option below except --dataset, --comm_round, --init_seed, --log_file_name and the folders
  # equals the code's default; they are spelled out for the record
  ( cd "$D" && exec timeout --signal=TERM --kill-after=10 "$LEFT" \
      "$PY" -u $ENTRY --dataset fmnist --partition noniid --beta 0.5 --n_parties "$PARTIES" \
      --batch-size 64 --lr 0.01 --epochs 1 --reg 1e-5 --optimizer sgd \
      --comm_round "$ROUNDS" --init_seed "$s" --device cuda:0 \
      --attacker_ratio 0.2 --poisoning_rate 0.8 --trigger_label 1 --trigger_size 5 \
      --trigger_path ./triggers/trigger_white.png \
      --global_defense "$G" --datadir "$WORK/data/" --logdir ./logs/ --modeldir ./models/ \
      --log_file_name "fedcpa-$r" $EXTRA ) >"$LOGS/fedcpa-$r.stdout" 2>&1 &
  PIDS="$PIDS $!"
  echo "$r $!" >>"$LOGS/pids.txt"
done; done

RCS=""
for p in $PIDS; do wait "$p"; RCS="$RCS $?"; done
echo "exit codes (124 = stopped at the wall cap):$RCS" | tee -a "$LOGS/env.txt"

# ---- summary + the code's own files ----
{
  echo "FedCPA authors' code ec43803 + Fashion-MNIST patch; LeNet, $PARTIES parties, 10 per round, 20 % attackers,"
  echo "5x5 white trigger bottom-right -> label 1 on 80 % of attacker data; seeds=$SEEDS, rounds requested=$ROUNDS"
  echo "acc = clean test accuracy of the global model, asr = accuracy w.r.t. label 1 on all 10k triggered test"
  echo "images (target class included), both in %; round numbering from 1 (code's round + 1); att_w = attackers'"
  echo "share of the cpa weights (mean over logged rounds with an attacker sampled)"
  for r in $RUNS; do
    L="$WORK/run-$r/logs/fedcpa-$r.log"
    if [ -f "$L" ]; then
      cp "$L" "$LOGS/"
      "$PY" "$PARSE" "$L" --csv "$LOGS/fedcpa-$r.csv" --summary --name "$r" 2>&1
    else
      echo "$r: no log (see fedcpa-$r.stdout)"
    fi
    [ -d "$WORK/run-$r/models" ] && cp -r "$WORK/run-$r/models" "$LOGS/models-$r"
  done
  echo "elapsed $(( $(date +%s) - START ))s; exit codes:$RCS"
} | tee "$SUM"
pack
