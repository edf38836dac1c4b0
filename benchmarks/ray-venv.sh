#!/bin/bash
# Makes (once) a separate virtual environment holding Ray RLlib next to Cadence, for the side-by-side
# sampling benchmark (benchmarks/bench_views.py); prints its python.
# usage: PY_RAY=$(benchmarks/ray-venv.sh [DIR])   (default DIR: ~/.cache/cadence-ray-venv)
#
# torch goes first, pinned (a CPU wheel of it is on this machine's disk; ray[rllib] does not ask for
# torch, so nothing replaces it), then ray[rllib] at the version measured, then Cadence itself
# (editable, so that the benchmark runs the working tree) with its light dependencies.
set -e
dir=${1:-$HOME/.cache/cadence-ray-venv}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ ! -f "$dir/.ready" ]; then
  rm -rf "$dir"
  python3.11 -m venv "$dir"
  pip="$dir/bin/pip"
  printf 'torch==2.13.0\n' > "$dir/constraints.txt"
  "$pip" install -q -c "$dir/constraints.txt" torch==2.13.0 >&2
  "$pip" install -q -c "$dir/constraints.txt" "ray[rllib]==2.60.0" >&2
  "$pip" install -q -c "$dir/constraints.txt" -e "$root" >&2
  "$dir/bin/python" -c "import ray.rllib, cadence.interop.rllib" >&2
  touch "$dir/.ready"
fi
echo "$dir/bin/python"
