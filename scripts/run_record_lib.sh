# Sourced by scripts/publish_table.sh and scripts/assemble_finished.sh: the files that record a finished
# `bastion reproduce` run, copied without its checkpoints and plots (large, or made again from rounds.csv).
#   copy_run_record CELL DEST   CELL's config.toml, summary.json, provenance.tsv, rounds.csv, timing.csv and
#                               client_notes.csv, and each seed-<k>/'s rounds.csv, timing.csv and
#                               client_notes.csv, into DEST (created); files a run lacks are skipped

copy_run_record() {
  local cell="${1%/}" dest="$2" f seed
  mkdir -p "$dest"
  for f in config.toml summary.json provenance.tsv rounds.csv timing.csv client_notes.csv; do
    [ -f "$cell/$f" ] && cp "$cell/$f" "$dest/"
  done
  for seed in "$cell"/seed-*/; do
    [ -d "$seed" ] || continue
    mkdir -p "$dest/$(basename "$seed")"
    for f in rounds.csv timing.csv client_notes.csv; do
      [ -f "$seed/$f" ] && cp "$seed/$f" "$dest/$(basename "$seed")/"
    done
  done
  return 0
}
