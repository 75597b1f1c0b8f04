#!/usr/bin/env bash
# Run the SPMC authors' own code (github.com/WenddHe0119/SPMC @ bc8e17e, unmodified)
# for SPMC Table 2, FashionMNIST, backdoor, gamma = 0.2: rows FedAvg, SPMC, RLR, Bulyan.
#
# Device usage (from the repo root, carry [".ref"]):
#     bash tests/reference/spmc/run_device.sh
# Needs .ref/spmc/{code,data/FashionMNIST/raw/*.gz,wheels} (see
# docs/reproduction/reference/spmc/README.md). No network is used.
#
# Knobs (environment variables, all optional):
#   OUT               output folder (default /tmp/out)
#   PY                python interpreter (default python3)
#   SPMC_ROWS         rows to run (default "fedavg spmc rlr bulyan"; also "fedavgw")
#   SPMC_DEADLINE_S   wall seconds from script start after which every run still going
#                     is stopped (default 560, so one 600 s device call returns in time)
#   SPMC_ROUNDS       communication rounds (default 50 = the code's FashionMNIST default)
#   SPMC_SEED         --seed (default 0 = the code's default)
#   SPMC_EXTRA_OPTS   extra yacs "KEY VALUE" overrides appended to every run
#   SPMC_WORK         scratch folder (default /tmp/spmc_work)
set -u
START=$(date +%s)
ROOT=$(pwd)
REF="$ROOT/.ref/spmc"
OUT=${OUT:-/tmp/out}
PY=${PY:-python3}
ROWS=${SPMC_ROWS:-"fedavg spmc rlr bulyan"}
DEADLINE=${SPMC_DEADLINE_S:-560}
ROUNDS=${SPMC_ROUNDS:-50}
SEED=${SPMC_SEED:-0}
EXTRA=${SPMC_EXTRA_OPTS:-}
WORK=${SPMC_WORK:-/tmp/spmc_work}
PATCH="$ROOT/docs/reproduction/reference/spmc/code.patch"
PARSE="$ROOT/tests/reference/spmc/parse_log.py"
mkdir -p "$OUT" "$WORK"
EXTRA_DIR="$WORK/extra"; mkdir -p "$EXTRA_DIR"
[ -d "$REF/code/RobustFederation" ] || { echo "missing $REF/code (carry .ref)"; exit 2; }

# ---- python deps missing on the device image: yacs, setproctitle (offline wheels) ----
DEPS="$WORK/deps"; mkdir -p "$DEPS"
export PYTHONPATH="$DEPS${PYTHONPATH:+:$PYTHONPATH}"
# wheels are zip files: unpack them (no pip needed); yacs is pure python, setproctitle is cp312 x86-64
for m in yacs setproctitle; do
  if ! "$PY" -c "import $m" 2>/dev/null; then
    for w in "$REF"/wheels/$m-*.whl; do
      [ -f "$w" ] && "$PY" -c "import sys,zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$w" "$DEPS" \
        && echo "$m: unpacked $(basename "$w")" >>"$EXTRA_DIR/pip.txt"
    done
  fi
done
if ! "$PY" -c "import setproctitle" 2>/dev/null; then
  # only renames the process in `ps`; no effect on training
  rm -rf "$DEPS"/setproctitle "$DEPS"/setproctitle-*.dist-info "$DEPS"/_setproctitle*
  printf 'def setproctitle(title):\n    pass\n' >"$DEPS/setproctitle.py"
  echo "setproctitle: stub used" >>"$EXTRA_DIR/pip.txt"
fi
"$PY" -c "import yacs" || { echo "yacs unavailable"; exit 3; }

# ---- pristine code copy (+ patch if present) ----
SRC="$WORK/src"; rm -rf "$SRC"; mkdir -p "$SRC"
cp -r "$REF/code/." "$SRC/"
if [ -s "$PATCH" ]; then
  (cd "$SRC" && patch -p1 --forward <"$PATCH") >"$EXTRA_DIR/patch.txt" 2>&1 \
    || { echo "patch failed"; cat "$EXTRA_DIR/patch.txt"; exit 4; }
else
  echo "no patch: code run unmodified" >"$EXTRA_DIR/patch.txt"
fi

# ---- data: torchvision FashionMNIST layout, uncompressed (so no download is attempted) ----
DATA="$WORK/data0/data_wk/FashionMNIST/raw"; mkdir -p "$DATA"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -s "$DATA/$f" ] || gunzip -c "$REF/data/FashionMNIST/raw/$f.gz" >"$DATA/$f"
done

# ---- environment record ----
{ date -u; hostname; nvidia-smi --query-gpu=name,memory.total --format=csv 2>&1 | tail -n +1;
  "$PY" -c "import sys,torch,torchvision,numpy,PIL;print(sys.version);print('torch',torch.__version__,'cuda',torch.cuda.is_available(),'tv',torchvision.__version__,'np',numpy.__version__,'PIL',PIL.__version__)";
  nproc; echo "rows=$ROWS rounds=$ROUNDS seed=$SEED deadline=$DEADLINE extra=$EXTRA"; } >"$EXTRA_DIR/env.txt" 2>&1

# ---- rows: Table 2 name -> (--optim, --server) ----
row_args() {
  case "$1" in
    fedavg)  echo "--optim FedAvG --server Equal" ;;           # analysis.py lists Equal, not Weight
    fedavgw) echo "--optim FedAvG --server Weight" ;;          # sample-weighted FedAvg variant
    spmc)    echo "--optim AlignedGradient --server SPMD" ;;   # LGAlign + MCAgg (no file named SPMC)
    rlr)     echo "--optim FedAvG --server RLR" ;;
    bulyan)  echo "--optim FedAvG --server Bulyan" ;;
    *) return 1 ;;
  esac
}

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}   # 4 concurrent runs on 16 cores; numerics unaffected
PIDS=""
for r in $ROWS; do
  A=$(row_args "$r") || { echo "unknown row $r"; continue; }
  D="$WORK/run-$r"; rm -rf "$D"; mkdir -p "$D"
  cp -r "$SRC/RobustFederation" "$D/"
  RF="$D/RobustFederation"
  mkdir -p "$RF/data"; : >"$RF/data/a.txt"          # main.py/training.py print this file
  ln -s "$WORK/data0" "$RF/data0"                   # utils/conf.py: single_domain_data_path()='data0/data_wk/'
  NOW=$(date +%s); LEFT=$(( DEADLINE - (NOW - START) ))
  [ "$LEFT" -lt 30 ] && LEFT=30
  echo "[$r] $A  (wall cap ${LEFT}s)"
  ( cd "$RF" && exec timeout --signal=TERM --kill-after=15 "$LEFT" \
      "$PY" -u main.py --device_id 0 --task label_skew --dataset fl_fashionmnist \
      --attack_type backdoor $A --seed "$SEED" --csv_log --csv_name table2 \
      attack.bad_client_rate 0.2 DATASET.communication_epoch "$ROUNDS" $EXTRA ) \
      >"$OUT/spmc-$r.log" 2>&1 &
  PIDS="$PIDS $!"
  echo "$r $!" >>"$EXTRA_DIR/pids.txt"
done

RCS=""
for p in $PIDS; do wait "$p"; RCS="$RCS $?"; done
echo "exit codes (124 = stopped at the wall cap):$RCS" | tee -a "$EXTRA_DIR/env.txt"

# ---- summary + extras ----
SUM="$OUT/spmc-summary.txt"
{
  echo "SPMC authors' code bc8e17e, FashionMNIST, base_backdoor, gamma=0.2, seed=$SEED, rounds requested=$ROUNDS"
  echo "A = clean test acc (global model); R = 100 - ASR (code's 'attack success rate'); both means of the last 5 logged rounds"
  for r in $ROWS; do
    L="$OUT/spmc-$r.log"; [ -f "$L" ] || continue
    "$PY" "$PARSE" "$L" --csv "$EXTRA_DIR/spmc-$r.csv" --summary --name "$r" 2>&1
  done
  echo "elapsed $(( $(date +%s) - START ))s; exit codes:$RCS"
} | tee "$SUM"
for r in $ROWS; do
  W="$WORK/run-$r/RobustFederation/Wdata"
  [ -d "$W" ] && cp -r "$W" "$EXTRA_DIR/Wdata-$r"
done
tar -czf "$OUT/spmc-extra.tar.gz" -C "$WORK" extra 2>/dev/null
ls -la "$OUT"
