#!/usr/bin/env bash
# The defense grid (docs/defenses.md): every server rule x {none, sign-flip, scale, lie, ipm, badnets}
# on Fashion-MNIST with configs/defenses/grid.toml, one seed, then a markdown table of the accuracy (and
# the backdoor's success rate for badnets), the mean of the evaluations at rounds 25 and 30.
#   scripts/defense_grid.sh [OUT_DIR] [RULE ...]     (default results/defense-grid, every rule)
# Finished cells are kept: run it again to fill in what is missing (a crashed or refused run leaves its
# log and no summary.json). Needs build/bastion and Fashion-MNIST (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bastion="${BASTION:-build/bastion}"  # BASTION=path/to/bastion to run another binary
out="${1:-results/defense-grid}"
shift || true
rules=("$@")
if [ ${#rules[@]} -eq 0 ]; then
  mapfile -t rules < <("$bastion" list defenses | awk '/^  [a-z]/ { print $1 }')
fi
attacks=(none sign-flip scale lie ipm badnets)

attack_args() {  # --set arguments for one attack column
  case "$1" in
    none) echo "--set attack.names=[] --set attack.malicious_fraction=0 --set attack.malicious_per_round=0" ;;
    ipm) echo "--set attack.names=[\"ipm\"] --set attack.ipm.epsilon=0" ;;  # epsilon = m (FedCAP A8)
    badnets) echo "--set attack.names=[\"badnets\"] --set attack.badnets.trigger=bapfl --set attack.badnets.target=2 --set attack.badnets.per_batch=20" ;;
    *) echo "--set attack.names=[\"$1\"]" ;;
  esac
}

rule_args() {  # wrappers wrap the coordinate-wise median; Bulyan needs n >= 4f + 3, so f = 1 of 10
  case "$1" in
    bucketing|gas) echo "--set server.rule=$1 --set server.inner=median" ;;
    bulyan) echo "--set server.rule=bulyan --set server.bulyan.f=1" ;;
    rsa) echo "--set server.rule=rsa --set clients.rsa.steps=0" ;;  # epochs from config_for's [clients.rsa]
    *) echo "--set server.rule=$1" ;;
  esac
}

config_for() {  # RSA is a client + server pair (persistent x_i): its workers take the grid's [clients.sgd] schedule
  if [ "$1" = rsa ]; then
    sed -e 's/^\[clients\.sgd\]/[clients.rsa]/' -e 's/^rule = "sgd"/rule = "rsa"/' configs/defenses/grid.toml > "$out/grid-rsa.toml"
    echo "$out/grid-rsa.toml"
  else
    echo configs/defenses/grid.toml
  fi
}
mkdir -p "$out"
for rule in "${rules[@]}"; do
  for attack in "${attacks[@]}"; do
    dir="$out/$rule/$attack"
    [ -f "$dir/summary.json" ] && continue
    mkdir -p "$dir"
    # shellcheck disable=SC2046
    if ! "$bastion" run "$(config_for "$rule")" $(rule_args "$rule") $(attack_args "$attack") \
        --out "$dir" --overwrite --quiet > "$dir/log.txt" 2>&1; then
      echo "$rule / $attack: failed, see $dir/log.txt" >&2
    fi
  done
done

value() {  # "mean" value of a key in a summary.json, as a percentage with one decimal, or -
  awk -v key="\"$2\":" '/"mean"/ { inside = 1 } inside && $1 == key { v = $2; sub(",", "", v);
    if (v == "null") print "-"; else printf "%.1f", 100 * v; exit }' "$1"
}

dacc() {  # detection accuracy of the (single) run, as a percentage, or -
  awk '$1 == "\"dacc\":" { v = $2; sub(",", "", v); if (v == "null") print "-"; else printf "%.0f", 100 * v; exit }' "$1"
}

{
  printf "| rule |"; for a in "${attacks[@]}"; do printf " %s |" "$a"; done; printf "\n"
  printf "|---|"; for _ in "${attacks[@]}"; do printf -- "---|"; done; printf "\n"
  for rule in "${rules[@]}"; do
    printf "| %s |" "$rule"
    for attack in "${attacks[@]}"; do
      summary="$out/$rule/$attack/summary.json"
      if [ ! -f "$summary" ]; then printf " failed |"; continue; fi
      if [ "$attack" = badnets ]; then
        printf " %s / %s |" "$(value "$summary" acc)" "$(value "$summary" asr)"
      else
        printf " %s |" "$(value "$summary" acc)"
      fi
    done
    printf "\n"
  done
  printf "\nDetection accuracy (%%, all rounds; rules that flag uploads):\n\n"
  printf "| rule |"; for a in "${attacks[@]}"; do printf " %s |" "$a"; done; printf "\n"
  printf "|---|"; for _ in "${attacks[@]}"; do printf -- "---|"; done; printf "\n"
  for rule in "${rules[@]}"; do
    row="| $rule |"
    flagged=0
    for attack in "${attacks[@]}"; do
      summary="$out/$rule/$attack/summary.json"
      value="-"
      [ -f "$summary" ] && value="$(dacc "$summary")"
      [ "$value" != "-" ] && flagged=1
      row="$row $value |"
    done
    if [ "$flagged" = 1 ]; then printf "%s\n" "$row"; fi  # (an `&&` here made the script exit 1 after a last rule that never flags)
  done
} | tee "$out/table.md"
