#!/usr/bin/env bash
# bench/cmp-outputs.sh -- save, then compare, the output bytes of the commands that read logs
# through the fold driver (replay, check, status, list, stagnation, postmortem, tail's
# start-up), so that a change to how they read can be shown to change nothing they print.
#
#   bench/cmp-outputs.sh save    OUT_DIR [LOOPCTL]   # record stdout, stderr and exit code
#   bench/cmp-outputs.sh compare OUT_DIR [LOOPCTL]   # run again, cmp against OUT_DIR
#   bench/cmp-outputs.sh against OLD_LOOPCTL [LOOPCTL]  # run both, each case back to back
#
# Some outputs depend on the clock (`stalled: no event for 257d 09h`): a saved output can go
# stale within the hour. `against` runs the old and the new binary one right after the other
# on each case, so only a change of hour between the two can make them differ.
# Inputs: every run folder of fixtures/, every log of $SHARED/corpus (SHARED defaults to
# ../shared beside the repo), and the bench logs in $DATA (default ../benchdata beside the repo:
# big70.jsonl, huge20k.jsonl, dir10k/; those missing are left out and said so).
# `compare` prints one line per difference and the counts, and exits 1 on any difference.
# stdout and the exit code must match; stderr differences are listed apart (notes/warnings).
set -euo pipefail
export LC_ALL=C NO_COLOR=1

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$(cd "$ROOT/.." && pwd)/shared}
DATA=${DATA:-$(cd "$ROOT/.." && pwd)/benchdata}

mode=${1:-}
out=${2:-}
bin=${3:-$ROOT/target/release/loopctl}
if [ -z "$mode" ] || [ -z "$out" ] || { [ "$mode" != save ] && [ "$mode" != compare ] && [ "$mode" != against ]; }; then
  sed -n '2,18p' "$0" >&2
  exit 2
fi
if [ "$mode" = against ]; then
  old_bin=$out
  [ -x "$old_bin" ] || { echo "no loopctl binary at $old_bin" >&2; exit 2; }
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
[ -x "$bin" ] || { echo "no loopctl binary at $bin" >&2; exit 2; }

logs=()
for d in "$ROOT"/fixtures/*/; do logs+=("${d%/}"); done
if [ -d "$SHARED/corpus" ]; then
  while IFS= read -r f; do logs+=("$f"); done < <(find "$SHARED/corpus" -type f \( -name '*.jsonl' -o -name '*.ndjson' \) | sort)
else
  echo "note: no corpus at $SHARED/corpus, left out" >&2
fi
for f in big70.jsonl huge20k.jsonl; do
  if [ -f "$DATA/$f" ]; then logs+=("$DATA/$f"); else echo "note: no $DATA/$f, left out" >&2; fi
done
roots=("$ROOT/fixtures")
if [ -d "$DATA/dir10k" ]; then roots+=("$DATA/dir10k"); else echo "note: no $DATA/dir10k, left out" >&2; fi

cases=()
for l in "${logs[@]}"; do
  for c in "stagnation $l" "stagnation $l --json" "postmortem $l" "postmortem $l --json" \
           "postmortem $l --format md" "tail $l --no-follow" "tail $l --no-follow -n 5 --json" \
           "tail $l --no-follow -n 3 --raw" "tail $l --no-follow -n 4 --level milestones" \
           "replay $l" "replay $l --json" "replay $l --no-snapshot" "check $l" "check $l --json" \
           "--threads 1 check $l --json" "status $l" "status $l --json" "list $l" "list $l --json"; do
    cases+=("$c")
  done
done
for r in "${roots[@]}"; do
  cases+=("tail $r --no-follow -n 5 --json" "tail $r --no-follow -n 2" "list $r" "list $r --json"
          "--threads 1 list $r --json")
done
cases+=("stagnation $ROOT/fixtures/stagnation $ROOT/fixtures/healthy-native --json")

mkdir -p "$out"
same=0 differ=0 stderr_differ=0
for c in "${cases[@]}"; do
  key=$(printf '%s' "$c" | sha1sum | cut -c1-16)
  set +e
  if [ "$mode" = against ]; then
    # shellcheck disable=SC2086
    (cd "$ROOT" && timeout 120 "$old_bin" $c) > "$out/$key.out" 2> "$out/$key.err"
    echo $? > "$out/$key.code"
  fi
  # shellcheck disable=SC2086
  (cd "$ROOT" && timeout 120 "$bin" $c) > "$out/$key.out.new" 2> "$out/$key.err.new"
  code=$?
  set -e
  echo "$code" > "$out/$key.code.new"
  if [ "$mode" = save ]; then
    for x in out err code; do mv "$out/$key.$x.new" "$out/$key.$x"; done
    printf '%s\n' "$c" > "$out/$key.cmd"
    continue
  fi
  if cmp -s "$out/$key.out" "$out/$key.out.new" && cmp -s "$out/$key.code" "$out/$key.code.new"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "DIFFERS: $c (exit $(cat "$out/$key.code") -> $code)"
  fi
  if ! cmp -s "$out/$key.err" "$out/$key.err.new"; then
    stderr_differ=$((stderr_differ + 1))
    echo "stderr differs: $c"
  fi
done
if [ "$mode" = save ]; then
  echo "saved ${#cases[@]} cases in $out"
else
  echo "compared ${#cases[@]} cases: $same same, $differ differ (stdout or exit code); stderr differs in $stderr_differ"
  [ "$differ" -eq 0 ]
fi
