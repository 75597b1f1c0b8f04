#!/usr/bin/env bash
# Copies a `bastion reproduce` output folder into docs/reproduction as a committed table with its runs:
#   docs/reproduction/NAME.md, NAME.csv, NAME.svg        (table.md, table.csv, table.svg)
#   docs/reproduction/NAME-runs/<cell>/                   config.toml, summary.json, provenance.tsv (and a
#                                                         one-seed run's rounds.csv, timing.csv, client_notes.csv)
#   docs/reproduction/NAME-runs/<cell>/seed-<k>/          rounds.csv, timing.csv, client_notes.csv
# Checkpoints and plots of single runs stay behind (they are large, or made again from rounds.csv).
# A hand-written note kept in docs/reproduction/NAME.note.md (which binaries made which runs, stopped
# rounds, ...) is appended to NAME.md after a blank line, so publishing again does not lose it.
# Usage: scripts/publish_table.sh OUT_DIR NAME    e.g. scripts/publish_table.sh results/pfedsam-table1 pfedsam-table1
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: scripts/publish_table.sh OUT_DIR NAME" >&2; exit 2; }
out="$1" name="$2" dest="docs/reproduction"
[ -f "$out/table.md" ] || { echo "publish_table: no table.md in $out (run bastion reproduce first)" >&2; exit 1; }
for ext in md csv svg; do cp "$out/table.$ext" "$dest/$name.$ext"; done
if [ -f "$dest/$name.note.md" ]; then
  printf '\n' >> "$dest/$name.md"
  cat "$dest/$name.note.md" >> "$dest/$name.md"
fi
runs="$dest/$name-runs"
rm -rf "$runs"
for cell in "$out"/runs/*/; do
  cell_name="$(basename "$cell")"
  mkdir -p "$runs/$cell_name"
  for f in config.toml summary.json provenance.tsv rounds.csv timing.csv client_notes.csv; do
    [ -f "$cell/$f" ] && cp "$cell/$f" "$runs/$cell_name/"
  done
  for seed in "$cell"seed-*/; do
    [ -d "$seed" ] || continue
    mkdir -p "$runs/$cell_name/$(basename "$seed")"
    for f in rounds.csv timing.csv client_notes.csv; do
      [ -f "$seed/$f" ] && cp "$seed/$f" "$runs/$cell_name/$(basename "$seed")/"
    done
  done
done
echo "published $dest/$name.{md,csv,svg} and $runs ($(du -sh "$runs" | cut -f1))"
