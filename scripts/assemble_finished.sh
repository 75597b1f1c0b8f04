#!/usr/bin/env bash
# Writes a paper table from the finished runs of a campaign split over several `bastion reproduce`
# output folders (one process per group of rows, each with its own --out), while other runs go on:
# copies every finished run (one with summary.json) of the SOURCE folders into OUT/runs, then runs
# `bastion reproduce PRESET --resume --out OUT` for the rows whose every cell has finished, so nothing
# is trained (a row with a missing cell is left out: --resume would start it). Pass the campaign's
# --set options after `--`: they are part of each run's config and must match for --resume to skip it.
#   scripts/assemble_finished.sh spmc-table5 results/spmc-table5-fc results/spmc-t5-a results/spmc-t5-b \
#       -- --set run.checkpoint_every=5
# Then scripts/publish_table.sh OUT NAME. Needs BASTION_DATA as the runs did; BASTION_BIN overrides
# build/bastion.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/run_record_lib.sh
[ $# -ge 3 ] || { echo "usage: scripts/assemble_finished.sh PRESET OUT SOURCE... [-- REPRODUCE_OPTIONS...]" >&2; exit 2; }
preset="$1" out="$2"
shift 2
sources=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do sources+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the "--"
mkdir -p "$out/runs"
declare -A columns=() rows=()
for source in "${sources[@]}"; do
  for cell in "$source"/runs/*/; do
    [ -d "$cell" ] || continue
    name="$(basename "$cell")"
    [[ "$name" == *--* ]] || continue
    rows["${name%%--*}"]=1
    columns["${name#*--}"]=1
    [ -f "$cell/summary.json" ] || continue
    rm -rf "$out/runs/$name"
    copy_run_record "$cell" "$out/runs/$name"
  done
done
row_args=()
for row in $(printf '%s\n' "${!rows[@]}" | sort); do  # a fixed order for the printed command
  complete=1
  for column in "${!columns[@]}"; do
    [ -f "$out/runs/$row--$column/summary.json" ] || complete=0
  done
  [ "$complete" = 1 ] && row_args+=(--row "$row")
done
[ ${#row_args[@]} -gt 0 ] || { echo "assemble_finished: no row has every cell finished yet" >&2; exit 1; }
echo "rows with every cell finished: ${row_args[*]}"
"${BASTION_BIN:-build/bastion}" reproduce "$preset" "${row_args[@]}" "$@" --resume --out "$out"
