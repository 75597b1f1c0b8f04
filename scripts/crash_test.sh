#!/usr/bin/env bash
# scripts/crash_test.sh [KILLS]: kills `bastion run` with SIGKILL at random moments, resumes it with
# --resume (on a random thread count), and checks that every file of the finished folder is the file an
# uninterrupted run writes, byte for byte. Default 20 kills; CTest runs 3 (tests/CMakeLists.txt).
#
# Configs: configs/ci/crash.toml and configs/ci/crash-fedsmoo.toml in turn ($CRASH_CONFIGS to change).
# Binary: $BASTION (default build/bastion). Kill times: a delay uniform over the first 80 % of the
# uninterrupted run's duration, then, for two kills in three, the next moment a checkpoint (or a results
# file) is being written; all drawn from bash's RANDOM seeded by $CRASH_SEED (printed for a replay).
# Writes are widened with the test-only hook BASTION_TEST_SLOW_WRITES (tensor/file_io.h: a sleep between
# the fsync and the rename of every file; $CRASH_SLOW_WRITES_MS, default 40) so that those moments last.
# The phase a kill hit is read from what it left: a "checkpoint.safetensors.tmp.<pid>" temporary means
# checkpoint writing, another "*.tmp.<pid>" means results writing (rounds.csv, timing.csv, config.toml,
# summary.json, curves.svg), none means computing (start-up, training, aggregation, evaluation).
# Compared: every file except timing.csv (wall times), whose round column must agree; summary.json with
# its seconds_per_round figures masked (wall times too); checkpoint.safetensors outside its "timing"
# tensor (the wall times again). Exit status 1 on the first difference or failed resume.
set -euo pipefail
cd "$(dirname "$0")/.."

KILLS="${1:-20}"
BASTION="${BASTION:-build/bastion}"
CONFIGS=(${CRASH_CONFIGS:-configs/ci/crash.toml configs/ci/crash-fedsmoo.toml})
SLOW_MS="${CRASH_SLOW_WRITES_MS:-40}"
CRASH_SEED="${CRASH_SEED:-$(( $(date +%s) % 32768 ))}"
RANDOM=$CRASH_SEED
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bastion-crash.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export BASTION_TEST_SLOW_WRITES="$SLOW_MS"
declare -A PHASES=([computing]=0 [results]=0 [checkpoint]=0)
declare -a DURATION_US

die() { echo "crash_test: FAIL: $*" >&2; exit 1; }
now_us() { echo $(( $(date +%s%N) / 1000 )); }

# start_run CONFIG DIR THREADS [--overwrite|--resume]: starts the run in the background, sets PID.
start_run() {
  local config="$1" dir="$2" threads="$3" mode="${4:---overwrite}"
  "$BASTION" run "$config" --out "$dir" --threads "$threads" "$mode" --quiet >>"$dir.log" 2>&1 &
  PID=$!
}

# A random delay in microseconds, uniform in [0, limit).
random_us() { echo $(( (RANDOM * 32768 + RANDOM) % $1 )); }

# Which phase the killed run was in, from the temporaries it left in DIR (and its seed-* folders).
phase_of() {
  local temps
  temps="$(find "$1" -name '*.tmp.*' -printf '%f\n' 2>/dev/null)"
  if grep -q '^checkpoint\.safetensors\.tmp\.' <<<"$temps"; then echo checkpoint
  elif [ -n "$temps" ]; then echo results
  else echo computing; fi
}

# True while the run is alive (a finished but not yet waited-for run is a zombie, state Z).
running() {
  local pid comm state
  read -r pid comm state _ < "/proc/$PID/stat" 2>/dev/null || return 1
  [ "$state" != Z ]
}

# Waits until a temporary of the TARGET kind (checkpoint | results) exists in DIR, or the run ends.
wait_for_temporary() {
  local dir="$1" target="$2" name
  while running; do
    for name in "$dir"/*.tmp.* "$dir"/seed-*/*.tmp.*; do
      [ -e "$name" ] || continue
      case "$name" in
        */checkpoint.safetensors.tmp.*) [ "$target" = checkpoint ] && return 0 ;;
        *) [ "$target" = results ] && return 0 ;;
      esac
    done
    sleep 0.001
  done
}

# Kills the run in DIR after a random delay (uniform below LIMIT_US) and, for a TARGET other than "any",
# at the next moment a temporary of that kind exists; sets PHASE to the phase the kill hit, read from
# what it left, or "finished" when the run ended first. (Not called in $(...): a subshell can neither
# wait for the run nor advance RANDOM.)
kill_at_random() {
  local limit_us="$1" dir="$2" target="$3" status=0 delay_us
  delay_us="$(random_us "$limit_us")"
  sleep "$(( delay_us / 1000000 )).$(printf '%06d' $(( delay_us % 1000000 )))"
  [ "$target" = any ] || wait_for_temporary "$dir" "$target"
  kill -KILL "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || status=$?  # 2>/dev/null: no "Killed" job notice
  if [ "$status" -eq 137 ]; then PHASE="$(phase_of "$dir")"
  elif [ "$status" -eq 0 ]; then PHASE=finished
  else die "run in $dir exited with status $status before the kill: $(tail -3 "$dir.log")"; fi
}

# Byte offsets [begin, end) of the "timing" tensor's data in a safetensors file ("" when absent).
timing_region() {
  local file="$1" header_bytes header offsets
  header_bytes="$(od -An -t u8 -N 8 "$file" | tr -d ' ')"
  header="$(head -c $(( 8 + header_bytes )) "$file" | tail -c "$header_bytes")"
  offsets="$(grep -o '"timing":{[^}]*}' <<<"$header" | sed -E 's/.*"data_offsets":\[([0-9]+),([0-9]+)\].*/\1 \2/')"
  [ -z "$offsets" ] && return 0
  set -- $offsets
  echo "$(( 8 + header_bytes + $1 )) $(( 8 + header_bytes + $2 ))"
}

same_checkpoint() {
  local a="$1" b="$2" region
  [ "$(stat -c %s "$a")" = "$(stat -c %s "$b")" ] || return 1
  region="$(timing_region "$a")"
  [ -n "$region" ] || { cmp -s "$a" "$b"; return; }
  set -- $region
  cmp -s -n "$1" "$a" "$b" && cmp -s -i "$2:$2" "$a" "$b"
}

mask_seconds() { sed -E 's/("seconds_per_round": *)[-0-9.eE+]+/\1T/' "$1"; }

# Every file of REF must be in DIR with the same bytes (modulo the wall times above), and no more.
compare_folders() {
  local ref="$1" dir="$2" f
  diff <(cd "$ref" && find . -type f | sort) <(cd "$dir" && find . -type f | sort) >&2 ||
    die "$dir holds other files than the uninterrupted run"
  while read -r f; do
    case "$f" in
      */timing.csv) cmp -s <(cut -d, -f1 "$ref/$f") <(cut -d, -f1 "$dir/$f") || die "$dir/$f: other rounds" ;;
      */summary.json) cmp -s <(mask_seconds "$ref/$f") <(mask_seconds "$dir/$f") ||
                        die "$dir/$f differs: $(diff <(mask_seconds "$ref/$f") <(mask_seconds "$dir/$f") | head -6)" ;;
      */checkpoint.safetensors) same_checkpoint "$ref/$f" "$dir/$f" || die "$dir/$f differs outside its timing tensor" ;;
      *) cmp -s "$ref/$f" "$dir/$f" || die "$dir/$f differs: $(diff "$ref/$f" "$dir/$f" | head -6)" ;;
    esac
  done < <(cd "$ref" && find . -type f | sort)
}

# The uninterrupted run of each config (threads 2), and its duration bounding the kill times.
reference_runs() {
  local i start
  for i in "${!CONFIGS[@]}"; do
    mkdir -p "$WORK/ref-$i"
    start="$(now_us)"
    start_run "${CONFIGS[$i]}" "$WORK/ref-$i" 2
    wait "$PID" || die "uninterrupted run of ${CONFIGS[$i]} failed: $(tail -3 "$WORK/ref-$i.log")"
    DURATION_US[$i]=$(( $(now_us) - start ))
    echo "reference ${CONFIGS[$i]}: $(( DURATION_US[i] / 1000 )) ms"
  done
}

# One trial: a fresh run killed at random, its resume killed again half the time, then resumed to the end.
trial() {
  local i="$1" dir="$2" config="${CONFIGS[$1]}" mode=--overwrite chained=0
  mkdir -p "$dir"
  while true; do
    start_run "$config" "$dir" $(( 1 + RANDOM % 3 )) "$mode"
    local targets=(any checkpoint results)
    kill_at_random $(( DURATION_US[i] * 4 / 5 )) "$dir" "${targets[RANDOM % 3]}"
    [ "$PHASE" = finished ] && break
    PHASES[$PHASE]=$(( PHASES[$PHASE] + 1 ))
    KILLED=$(( KILLED + 1 ))
    echo "kill $KILLED: $config, $PHASE"
    mode=--resume
    chained=$(( chained + 1 ))
    (( KILLED < KILLS && chained < 3 && RANDOM % 2 == 0 )) || break
  done
  if [ "$mode" = --resume ]; then
    start_run "$config" "$dir" $(( 1 + RANDOM % 3 )) --resume
    wait "$PID" || die "resume of $dir failed: $(tail -3 "$dir.log")"
  fi
  compare_folders "$WORK/ref-$i" "$dir"
}

main() {
  [ -x "$BASTION" ] || die "no bastion binary at $BASTION (build first, or set BASTION)"
  echo "crash_test: $KILLS kills, seed $CRASH_SEED, writes slowed by $SLOW_MS ms, work folder $WORK"
  local begin trial_index=0
  begin="$(now_us)"
  reference_runs
  KILLED=0
  while (( KILLED < KILLS )); do
    (( trial_index < 4 * KILLS )) || die "only $KILLED of $KILLS kills landed in $trial_index trials"
    trial $(( trial_index % ${#CONFIGS[@]} )) "$WORK/trial-$trial_index"
    trial_index=$(( trial_index + 1 ))
  done
  echo "crash_test: OK: $KILLED kills in $trial_index trials (computing ${PHASES[computing]}, results writing" \
       "${PHASES[results]}, checkpoint writing ${PHASES[checkpoint]}), every folder identical to the" \
       "uninterrupted run, $(( ($(now_us) - begin) / 1000 )) ms"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then main; fi  # sourced: the functions only (for checking them)
