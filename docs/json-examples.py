#!/usr/bin/env python3
"""Prints docs/json.md's examples again from the binary, for pasting after a change.

Run from the repository root after `cargo build`:
  grep -o 'example (.*): loopctl .* -->' docs/json.md \
    | sed -E 's/example \((.*)\): loopctl (.*) -->/\1 \2/' | python3 docs/json-examples.py
Each input line is `doc ARGS` (one JSON value; arrays cut to the fewest leading elements that
keep every key) or `lines=N ARGS` (the first N lines of NDJSON).
"""
import json, shlex, subprocess, sys

def paths(v, p="", out=None):
    out = set() if out is None else out
    if isinstance(v, dict):
        for k, x in v.items():
            out.add(p + "." + k)
            paths(x, p + "." + k, out)
    elif isinstance(v, list):
        for x in v:
            paths(x, p + "[]", out)
    return out

def shorten(v):
    # Greedy: for each array, keep the fewest leading elements that keep the path set.
    want = paths(v)
    def rec(node, root):
        if isinstance(node, dict):
            for k in node:
                rec(node[k], root)
        elif isinstance(node, list):
            for x in node:
                rec(x, root)
            full = list(node)
            for n in range(1, len(full) + 1):
                node[:] = full[:n]
                if paths(root) == want:
                    break
    v = json.loads(json.dumps(v))
    rec(v, v)
    return v

for line in sys.stdin:
    args = line.strip()
    if not args:
        continue
    mode, args = args.split(" ", 1)
    out = subprocess.run([__import__("os").environ.get("LOOPCTL", "target/debug/loopctl")] + shlex.split(args), capture_output=True, text=True).stdout
    print(f"<!-- example ({mode}): loopctl {args} -->")
    print("```json")
    if mode == "doc":
        print(json.dumps(shorten(json.loads(out)), indent=2, ensure_ascii=False))
    else:
        n = int(mode.split("=")[1])
        for l in out.splitlines()[:n]:
            print(l)
    print("```")
    print()
