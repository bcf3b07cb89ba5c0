#!/usr/bin/env bash
# loopctl's own cost per phase: a loop of N phases of `true` under `loopctl run`, against the
# same N commands from a shell loop (`sh -c true`, as loopctl runs a `run` phase).
#   bench/runner-overhead.sh [--phases N] [--runs R]
# Builds the release binary. Each run gets a fresh root (ext4 makes creating files in a folder
# of just-deleted ones slow, which would bill loopctl for the benchmark's own cleanup).
set -euo pipefail
phases=1000 runs=5
while [ $# -gt 0 ]; do
  case "$1" in
    --phases) phases=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--phases N] [--runs R]" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p loopctl --manifest-path "$here/Cargo.toml"
bin="$here/target/release/loopctl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '{"max_iterations":%d,"loop":[{"name":"t","run":"true"}]}\n' "$phases" > "$work/loop.json"

now() { date +%s.%N; }
calc() { awk "BEGIN {printf \"%.6f\", $1}"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

shell_times=() loop_times=()
for r in $(seq "$runs"); do
  t0=$(now); for _ in $(seq "$phases"); do /bin/sh -c true; done; t1=$(now)
  shell_times+=("$(calc "$t1 - $t0")")
  t0=$(now); "$bin" run -q --loop-file "$work/loop.json" --root "$work/root$r" --dir "$work"; t1=$(now)
  loop_times+=("$(calc "$t1 - $t0")")
  events=$(wc -l < "$work"/root$r/*/history.jsonl)
  [ "$events" -eq $((2 * phases + 2)) ] || { echo "expected $((2 * phases + 2)) events, got $events" >&2; exit 1; }
done
shell=$(printf '%s\n' "${shell_times[@]}" | median)
loop=$(printf '%s\n' "${loop_times[@]}" | median)
per_shell=$(calc "$shell * 1000 / $phases")
per_loop=$(calc "$loop * 1000 / $phases")
over=$(calc "$per_loop - $per_shell")
printf '%d phases of `true`, median of %d runs\n' "$phases" "$runs"
printf '  shell loop   %6.2f s  %5.2f ms/phase\n' "$shell" "$per_shell"
printf '  loopctl run  %6.2f s  %5.2f ms/phase\n' "$loop" "$per_loop"
printf '  overhead     %5.2f ms/phase (target < 2 ms): %s\n' "$over" "$(awk "BEGIN {print ($over < 2) ? \"met\" : \"NOT met\"}")"
