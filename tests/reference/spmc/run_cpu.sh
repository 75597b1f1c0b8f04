#!/usr/bin/env bash
# Maintainer-only: SPMC Table 2 (FashionMNIST, backdoor, gamma = 0.2), rows FedAvg, SPMC, RLR and Bulyan, at a
# reduced scale on the CPU: the SPMC authors' code (github.com/WenddHe0119/SPMC @ bc8e17e, unmodified, run by
# Debian's /usr/bin/python3 with torch 1.13) and Bastion at the same setting.
# docs/reproduction/reference/spmc/cpu/README.md has the choices, the costs and the results.
#
# Usage (from the repo root):
#     bash tests/reference/spmc/run_cpu.sh code ROW [SEED]      # one row of the authors' code (default seed 0)
#     bash tests/reference/spmc/run_cpu.sh bastion ROW SEED     # one row of Bastion, one seed
#     bash tests/reference/spmc/run_cpu.sh parse                # per-round CSVs of every code log in $OUT/code
#     bash tests/reference/spmc/run_cpu.sh compare              # $OUT/comparison.md/.csv and curves.svg/.csv
#     bash tests/reference/spmc/run_cpu.sh all                  # every row: code seed 0, Bastion seeds 0 1 2
#                                                               # (sequential, about 3 h on a free core), then compare
# ROW: fedavg | spmc | rlr | bulyan.
# Needs .ref/spmc/{code,data/FashionMNIST/raw/*.gz,wheels} (docs/reproduction/reference/spmc/README.md) and a
# Bastion binary. No network is used. Every process runs with 1 thread under nice -n 5.
#
# Knobs (environment variables):
#   OUT          results folder (default results/spmc-cpu): code/ (logs) and bastion/<row>-s<seed>/
#   BASTION      Bastion binary (default build/bastion)
#   BASTION_DATA dataset folder for Bastion (default /work/shared/datasets)
#   PY           python with torch (default /usr/bin/python3: Debian's torch 1.13.1 / torchvision 0.14.1)
#   SPMC_RATIO   the code's DATASET.train_val_domain_ratio = share of the 60k training images dealt to the
#                10 clients (default 0.45: 27,000 images, 2,700 per client on average); Bastion gets the
#                same images with data.server_fraction = 1 - SPMC_RATIO (the first 27,000)
#   ROUNDS_SPMC  rounds of the SPMC row (default 20); ROUNDS_E1: rounds of the other rows (default 30)
#   SPMC_WORK    scratch folder for the code's copies (default /tmp/spmc_cpu)
#   SPMC_PATCH   a patch (patch -p1 in the code's root) applied to this run's copy only: for diagnostic runs, never
#                for the reference rows (docs/reproduction/reference/spmc/cpu/rlr-own-update.patch)
#   SPMC_TAG     suffix of a code run's file names (default none), e.g. -ownupdate for a patched run
#   BASTION_SETS extra `--set`s (space-separated key=value) for a diagnostic Bastion run, never for the reference
#                rows; BASTION_TAG: the suffix of its folder name, e.g. BASTION_SETS=attack.badnets.augment_once=true
#                BASTION_TAG=-augonce -> bastion/spmc-augonce-s0. Since 2026-11-28 the base config itself has
#                augment_once = true (the code's frozen crops); the committed rows without a tag were made before,
#                with fresh crops: BASTION_SETS=attack.badnets.augment_once=false gives those again
set -u
ROOT=$(pwd)
REF="$ROOT/.ref/spmc"
OUT=${OUT:-results/spmc-cpu}
case "$OUT" in /*) ;; *) OUT="$ROOT/$OUT" ;; esac
PY=${PY:-/usr/bin/python3}
BASTION=${BASTION:-build/bastion}
export BASTION_DATA=${BASTION_DATA:-/work/shared/datasets}
RATIO=${SPMC_RATIO:-0.45}
ROUNDS_SPMC=${ROUNDS_SPMC:-20}
ROUNDS_E1=${ROUNDS_E1:-30}
WORK=${SPMC_WORK:-/tmp/spmc_cpu}
PATCH=${SPMC_PATCH:-}
TAG=${SPMC_TAG:-}
PARSE="$ROOT/tests/reference/spmc/parse_log.py"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
TIMEFMT="wall %e s, user %U s, sys %S s (the process and its loader workers), max RSS %M KB"

AWK_LINES=""; awk -W version 2>&1 | grep -q mawk && AWK_LINES="-W interactive"   # mawk reads pipes in blocks otherwise

rounds_of() { [ "$1" = spmc ] && echo "$ROUNDS_SPMC" || echo "$ROUNDS_E1"; }

prepare_code() {
  [ -d "$REF/code/RobustFederation" ] || { echo "missing $REF/code"; exit 2; }
  mkdir -p "$WORK/deps" "$WORK/data0/data_wk/FashionMNIST/raw"
  # yacs is not in Debian's python: unpack its wheel (pure python, no pip); setproctitle is Debian's
  "$PY" -c "import yacs" 2>/dev/null || PYTHONPATH="$WORK/deps" "$PY" -c "import yacs" 2>/dev/null ||
    "$PY" -c "import sys,zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
      "$REF"/wheels/yacs-*.whl "$WORK/deps"
  # torchvision's FashionMNIST layout, uncompressed, so that download=True finds the files and downloads nothing
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -s "$WORK/data0/data_wk/FashionMNIST/raw/$f" ] ||
      gunzip -c "$REF/data/FashionMNIST/raw/$f.gz" >"$WORK/data0/data_wk/FashionMNIST/raw/$f"
  done
}

code_args() {  # Table 2 row -> the code's --optim / --server (docs/reproduction/reference/spmc/README.md)
  case "$1" in
    fedavg) echo "--optim FedAvG --server Equal" ;;
    spmc)   echo "--optim AlignedGradient --server SPMD" ;;
    rlr)    echo "--optim FedAvG --server RLR" ;;
    bulyan) echo "--optim FedAvG --server Bulyan" ;;
    *) return 1 ;;
  esac
}

run_code() {  # ROW SEED
  local row=$1 seed=${2:-0} args rounds d log rc start
  args=$(code_args "$row") || { echo "unknown row $row"; exit 2; }
  rounds=$(rounds_of "$row")
  prepare_code
  d="$WORK/run-$row-s$seed$TAG"; rm -rf "$d"; mkdir -p "$d" "$OUT/code"
  cp -r "$REF/code/RobustFederation" "$d/"                 # a pristine copy per run (the code writes Wdata/ into it)
  if [ -n "$PATCH" ]; then (cd "$d" && patch -p1 <"$PATCH") || { echo "patch failed"; exit 4; }; fi
  mkdir -p "$d/RobustFederation/data"; : >"$d/RobustFederation/data/a.txt"   # main.py prints this file; not in the repo
  ln -s "$WORK/data0" "$d/RobustFederation/data0"         # utils/conf.py: single_domain_data_path() = 'data0/data_wk/'
  log="$OUT/code/spmc-$row-s$seed$TAG.log"
  start=$(date +%s)
  echo "code $row seed $seed: $rounds rounds, train_val_domain_ratio $RATIO, patch ${PATCH:-none}, started $(date -u +%FT%TZ)" >"$log.time"
  # the code's stdout goes to $log unchanged; $log.rounds gets the wall clock (epoch seconds) of each [TEST]/[ROBUST] line
  # shellcheck disable=SC2086
  ( cd "$d/RobustFederation" && PYTHONPATH="$WORK/deps" exec /usr/bin/time -o "$log.cpu" -f "$TIMEFMT" \
      nice -n 5 "$PY" -u main.py --device_id 0 \
      --task label_skew --dataset fl_fashionmnist --attack_type backdoor $args --seed "$seed" --csv_log \
      --csv_name table2 attack.bad_client_rate 0.2 DATASET.communication_epoch "$rounds" \
      DATASET.train_val_domain_ratio "$RATIO" ) 2>&1 | tee "$log" |
    awk $AWK_LINES '/\[TEST\]|\[ROBUST\]/ { print systime(), $0; fflush() }' >"$log.rounds"
  rc=${PIPESTATUS[0]}
  echo "exit $rc, wall $(( $(date +%s) - start )) s, ended $(date -u +%FT%TZ)" >>"$log.time"
  "$PY" "$PARSE" "$log" --csv "$OUT/code/spmc-$row-s$seed$TAG.csv"
}

bastion_sets() {  # the code's setting per row (1 local epoch for FedAvG-optim rows, its Equal FedAvg, its Bulyan)
  local e1="clients.rule=sgd clients.sgd.epochs=1 clients.sgd.weight_decay=1e-5 clients.sgd.drop_last=true"
  case "$1" in
    fedavg) echo "$e1 server.rule=fedavg server.fedavg.weighting=uniform" ;;
    spmc)   echo "clients.rule=spmc server.rule=spmc" ;;
    rlr)    echo "$e1 server.rule=rlr" ;;
    bulyan) echo "$e1 server.rule=bulyan server.expected_malicious=0.1 server.bulyan.momentum=0.9 server.bulyan.base=client-0" ;;
    *) return 1 ;;
  esac
}

run_bastion() {  # ROW SEED
  local row=$1 seed=$2 sets s args=() out
  sets=$(bastion_sets "$row") || { echo "unknown row $row"; exit 2; }
  for s in $sets ${BASTION_SETS:-} attack.malicious_fraction=0.2 "rounds=$(rounds_of "$row")" seed="$seed" \
           data.server_fraction="$("$PY" -c "print(round(1 - $RATIO, 6))")" run.checkpoint_every=0 run.threads=1; do
    args+=(--set "$s")
  done
  out="$OUT/bastion/$row${BASTION_TAG:-}-s$seed"
  mkdir -p "$OUT/bastion"
  /usr/bin/time -o "$out.cpu" -f "$TIMEFMT" nice -n 5 "$BASTION" run configs/papers/spmc-fmnist-backdoor.toml "${args[@]}" --threads 1 --quiet \
    --overwrite --out "$out"
  # `bastion run` writes no provenance.tsv (only `reproduce` does): the same line, date / commit / machine
  printf '%s\t%s\t%s, %s hardware threads\n' "$(date -u +%F)" "$("$BASTION" --version | sed 's/.*built from //')" \
    "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" "$(nproc --all)" >>"$out/provenance.tsv"   # plain nproc obeys OMP_NUM_THREADS
}

compare() {  # the code's runs beside Bastion's: table (compare_cpu.py) and curves (curves.py), from $OUT
  local row f code ours series_a=() series_r=()
  "$PY" "$ROOT/tests/reference/spmc/compare_cpu.py" --code-dir "$OUT/code" --bastion-dir "$OUT/bastion" \
    --out-md "$OUT/comparison.md" --out-csv "$OUT/comparison.csv" --rows fedavg,rlr,rlr+-ownupdate,bulyan,spmc
  for row in fedavg rlr bulyan spmc; do
    code=""; ours=""
    for f in "$OUT"/code/spmc-$row-s[0-9].csv "$OUT"/code/spmc-$row-s[0-9][0-9].csv; do [ -f "$f" ] && code="$code,$f"; done
    for f in "$OUT"/bastion/$row-s*/rounds.csv; do [ -f "$f" ] && ours="$ours,$f"; done
    [ -n "$code" ] && series_a+=(--series "$row: code|dash|acc|1|1|${code#,}") && series_r+=(--series "$row: code|dash|R|1|1|${code#,}")
    [ -n "$ours" ] && series_a+=(--series "$row: Bastion|solid|acc|100|0|${ours#,}") && series_r+=(--series "$row: Bastion|solid|bfr|100|0|${ours#,}")
  done
  "$PY" "$ROOT/tests/reference/curves.py" --out-svg "$OUT/curves.svg" --out-csv "$OUT/curves.csv" \
    --title "SPMC Table 2 rows, FashionMNIST, gamma 0.2, 2,700 images per client: authors' code (dashed) vs Bastion (solid, mean over seeds)" \
    --panel "A: clean accuracy (%)" "${series_a[@]}" --panel "R = 100 - ASR (%)" "${series_r[@]}"
}

case "${1:-}" in
  code) run_code "$2" "${3:-0}" ;;
  bastion) run_bastion "$2" "$3" ;;
  parse) for l in "$OUT"/code/*.log; do "$PY" "$PARSE" "$l" --csv "${l%.log}.csv"; done ;;
  compare) compare ;;
  all)
    for r in fedavg rlr bulyan spmc; do run_code "$r" 0; done
    for r in fedavg rlr bulyan spmc; do for s in 0 1 2; do run_bastion "$r" "$s"; done; done
    compare ;;
  *) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 2 ;;
esac
