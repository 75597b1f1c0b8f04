#!/usr/bin/env bash
# Checks that a change to the run loop or the units' plumbing changed no result: runs the same short
# experiments with two binaries and compares their results files byte for byte (issue 37's "no behaviour
# change" check; timing.csv and provenance are left out, they hold times and the binary's commit).
#   scripts/same_results.sh OLD_BINARY NEW_BINARY [WORK_DIR]
# The runs (about 3 min per binary on the 2-core Xeon):
#   demo        configs/demo.toml at 10 rounds (FedAvg, BadNets, Dirichlet 0.5)
#   fedcap      FedCAP server and client rule with partial participation (the round plan's request path),
#               scale attackers, personalised evaluation of the final round's next start states
#   fedrep      FedRep (a personal head, shared body) with personalised evaluation
#   fedfsa      FedFSA (a method server: momentum messages, SAM steps)
#   mofedsam, fedsmoo, fedsam-adaptive: the SAM step's other paths (ascent scale and linear term; FedSMOO's
#               dual, which keeps the perturbation; the adaptive perturbation)
#   ditto, ditto-interleaved, fedrod: the rules with two passes or their own step (BadNets attackers
#               in two of them: the attack's loader)
#   pfedsam     bastion reproduce pfedsam-table1 --quick (CI's table): table.csv and every run's rounds.csv
# Needs BASTION_DATA (MNIST for pfedsam) and Fashion-MNIST in /usr/share/datasets. Exit 1 on a difference.
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2")
work=${3:-$(mktemp -d)}
mkdir -p "$work"
cd "$(dirname "$0")/.."
# A small base for the rule runs: the demo's data and model, 12 clients, 6 a round, 3 rounds.
cat > "$work/base.toml" <<'TOML'
name = "same-results"
seed = 1
rounds = 3
[data]
dataset = "fmnist"
partition = "dirichlet:0.5"
clients = 12
min_size = 10
local_test = "like-train"
[model]
name = "lenet"
[clients]
per_round = 6
[eval]
every = 1
TOML
base="$work/base.toml"
declare -A runs=(
  [demo]="configs/demo.toml --set rounds=10"
  [fedcap]="$base --set clients.rule=fedcap --set server.rule=fedcap --set attack.names=[\"scale\"] --set attack.malicious_count=2 --set attack.malicious_per_round=1 --set eval.personalized=true --set eval.personal_received=true --set eval.personal_received_final=next"
  [fedrep]="$base --set clients.rule=fedrep --set eval.personalized=true"
  [fedfsa]="$base --set clients.rule=fedfsa --set eval.personalized=true"
  [mofedsam]="$base --set clients.rule=mofedsam --set eval.personalized=true"
  [fedsmoo]="$base --set clients.rule=fedsmoo --set eval.personalized=true"
  [fedsam-adaptive]="$base --set clients.rule=fedsam --set clients.fedsam.sam_perturbation=\"adaptive\""
  [ditto]="$base --set clients.rule=ditto --set eval.personalized=true --set attack.names=[\"badnets\"] --set attack.malicious_count=2 --set attack.malicious_per_round=1"
  [ditto-interleaved]="$base --set clients.rule=ditto --set clients.ditto.order=\"interleaved\" --set eval.personalized=true"
  [fedrod]="$base --set clients.rule=fedrod --set eval.personalized=true --set attack.names=[\"badnets\"] --set attack.malicious_count=2 --set attack.malicious_per_round=1"
)
status=0
for name in "${!runs[@]}"; do
  for which in old new; do
    binary=$old; [[ $which == new ]] && binary=$new
    # shellcheck disable=SC2086  # the run's arguments are split on purpose
    "$binary" run ${runs[$name]} --quiet --threads 2 --out "$work/$which/$name" --overwrite > /dev/null
  done
  for file in rounds.csv summary.json clients.csv client_notes.csv partition.csv; do
    [[ -e $work/old/$name/$file || -e $work/new/$name/$file ]] || continue
    if ! cmp -s <(grep -v '"seconds_per_round"' "$work/old/$name/$file") <(grep -v '"seconds_per_round"' "$work/new/$name/$file"); then
      echo "DIFFERENT: $name/$file"; status=1
    else
      echo "same: $name/$file"
    fi
  done
done
for which in old new; do
  binary=$old; [[ $which == new ]] && binary=$new
  "$binary" reproduce pfedsam-table1 --quick --out "$work/$which/pfedsam" --overwrite > /dev/null
done
for file in "$work"/old/pfedsam/table.csv $(find "$work"/old/pfedsam/runs -name rounds.csv | sort); do
  relative=${file#"$work"/old/}
  if cmp -s "$file" "$work/new/$relative"; then echo "same: $relative"; else echo "DIFFERENT: $relative"; status=1; fi
done
exit $status
