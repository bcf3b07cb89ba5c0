#!/usr/bin/env bash
# bench/cmp-export.sh OLD_LOOPCTL [NEW_LOOPCTL] -- `loopctl export prometheus` must print the
# same bytes (stdout, stderr, exit code) as a reference binary: over every fixture run folder,
# fixtures/ as a root, the corpus (aif-loop and avenor logs), dir10k and big70.jsonl, each also
# with `--threads 1`. The two binaries run back to back on each case. Exits 1 on a difference.
# SHARED (default ../shared beside the repo) and DATA (default ../benchdata) locate the inputs;
# those missing are left out and said so.
set -euo pipefail
export LC_ALL=C NO_COLOR=1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$(cd "$ROOT/.." && pwd)/shared}
DATA=${DATA:-$(cd "$ROOT/.." && pwd)/benchdata}
old=${1:?usage: bench/cmp-export.sh OLD_LOOPCTL [NEW_LOOPCTL]}
new=${2:-$ROOT/target/release/loopctl}
for b in "$old" "$new"; do [ -x "$b" ] || { echo "no loopctl binary at $b" >&2; exit 2; }; done

inputs=("$ROOT/fixtures")
for d in "$ROOT"/fixtures/*/; do inputs+=("${d%/}"); done
if [ -d "$SHARED/corpus" ]; then
  inputs+=("$SHARED/corpus/aif-loop/vedo-hub")
  while IFS= read -r f; do inputs+=("$f"); done < <(find "$SHARED/corpus" -type f \( -name '*.jsonl' -o -name '*.ndjson' \) | sort)
else
  echo "note: no corpus at $SHARED/corpus, left out" >&2
fi
for x in dir10k big70.jsonl; do
  if [ -e "$DATA/$x" ]; then inputs+=("$DATA/$x"); else echo "note: no $DATA/$x, left out" >&2; fi
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
same=0 differ=0
for i in "${inputs[@]}"; do
  for t in "" "--threads 1"; do
    for b in old new; do
      bin=$old; [ $b = new ] && bin=$new
      set +e
      # shellcheck disable=SC2086
      (cd "$ROOT" && timeout 300 "$bin" $t export prometheus "$i") >"$out/$b.out" 2>"$out/$b.err"
      echo $? >"$out/$b.code"
      set -e
    done
    if cmp -s "$out/old.out" "$out/new.out" && cmp -s "$out/old.err" "$out/new.err" \
      && cmp -s "$out/old.code" "$out/new.code"; then
      same=$((same + 1))
    else
      differ=$((differ + 1))
      echo "DIFFERS: ${t:+$t }export prometheus $i"
    fi
  done
done
echo "export prometheus: $((same + differ)) cases, $same same, $differ differ"
[ "$differ" -eq 0 ]
