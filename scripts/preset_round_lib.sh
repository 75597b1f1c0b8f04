# Sourced by scripts/ab_preset_round.sh and bench/fedfsa_round_vs_pytorch.sh: one preset row's FL round
# timed the same way in both.
#   median               the median of the numbers on stdin, 3 decimals
#   preset_round LABEL REPEAT BIN PRESET ROW ROUNDS DIR FIGURES
#                        runs `BIN reproduce PRESET --row ROW --seeds 1 --set rounds=ROUNDS --threads 1 --out
#                        DIR` and appends "LABEL REPEAT CELL FIGURE" per cell to FIGURES (and stdout), FIGURE
#                        the median over rounds 2..ROUNDS-1 of train_s + aggregate_s (timing.csv: round 1
#                        warms caches, the last holds a preset's final tuning, eval_s is left out)

median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }

preset_round() {
  local label="$1" repeat="$2" bin="$3" preset="$4" row="$5" rounds="$6" dir="$7" figures="$8" timing cell figure
  "$bin" reproduce "$preset" --row "$row" --seeds 1 --set "rounds=$rounds" --threads 1 --out "$dir" \
    > "$dir.log" 2>&1 || { cat "$dir.log" >&2; return 1; }
  for timing in "$dir"/runs/*/timing.csv; do
    cell="$(basename "$(dirname "$timing")")"
    figure="$(awk -F, -v last="$rounds" 'NR > 2 && $1 < last { print $2 + $3 }' "$timing" | median)"
    echo "$label $repeat $cell $figure" | tee -a "$figures"
  done
}
