#!/bin/bash
# Makes (once) a separate virtual environment holding the real DI-engine 0.5.3 next to Cadence, for
# side-by-side checks and benchmarks against ding.envs; prints its python.
# usage: PY_DING=$(benchmarks/ding-venv.sh [DIR])   (default DIR: ~/.cache/cadence-ding-venv)
#
# DI-engine 0.5.3 pins gym==0.25.1, numpy<2, setuptools<=66.1.1, flask/werkzeug<=2.0.3, wandb, yapf...;
# torch 2.13 needs setuptools>=77.0.3, so `pip install di-engine` cannot resolve. Instead: torch first,
# then DI-engine (and DI-toolkit, whose declared deps pull pandas/scipy/sklearn/tensorboard) with
# --no-deps, then by hand only what `import ding.envs, ding.utils` and dizoo's CartPoleEnv import.
# numpy 1.26.x satisfies both DI-engine (<2) and Cadence (>=1.26). setuptools stays at what torch
# wants: nothing on the ding.envs import path uses pkg_resources.
set -e
dir=${1:-$HOME/.cache/cadence-ding-venv}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ ! -f "$dir/.ready" ]; then
  rm -rf "$dir"
  python3.11 -m venv "$dir"
  pip="$dir/bin/pip"
  # never let pip swap torch or move numpy to 2.x
  printf 'torch==2.13.0\nnumpy>=1.26,<2\n' > "$dir/constraints.txt"
  "$pip" install -q -c "$dir/constraints.txt" torch==2.13.0 >&2
  "$pip" install -q --no-deps di-engine==0.5.3 DI-toolkit==0.3.0 >&2
  "$pip" install -q -c "$dir/constraints.txt" \
    "numpy==1.26.4" gym==0.25.1 DI-treetensor==0.5.0 treevalue==1.5.0 hbutils==0.14.2 \
    easydict==1.14 pyyaml==6.0.4 tabulate==0.10.0 rich==15.0.0 \
    flask==2.0.3 werkzeug==2.0.3 requests==2.34.2 URLObject==3.0.0 enum-tools==0.13.0 \
    tensorboardX==2.6.5 hickle==5.0.3 mpire==2.10.2 redis==8.1.0 pynng==0.9.0 sniffio==1.3.1 \
    gymnasium==1.4.0 tensordict==0.15.3 "packaging>=21" >&2
  "$pip" install -q --no-deps -e "$root" >&2
  "$dir/bin/python" -c "import ding.envs, ding.utils, dizoo.classic_control.cartpole.envs, cadence" >&2
  touch "$dir/.ready"
fi
echo "$dir/bin/python"
