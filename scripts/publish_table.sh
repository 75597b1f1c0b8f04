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
. scripts/run_record_lib.sh
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
  copy_run_record "$cell" "$runs/$(basename "$cell")"
done
echo "published $dest/$name.{md,csv,svg} and $runs ($(du -sh "$runs" | cut -f1))"
