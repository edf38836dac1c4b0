"""Speed of the value estimates: Cadence vs the reference library vs a Python loop over time.

TD(lambda) returns and GAE on ``[256, 1000, 1]`` data (gamma 0.99, lmbda 0.95, about one
done step in 100, half of them terminations), three contenders:

* ``cadence``: ``cadence.objectives.value.functional.vec_td_lambda_return_estimate`` and
  ``vec_generalized_advantage_estimate``;
* ``torchrl``: ``torchrl.objectives.value.functional``'s functions of the same names
  (torchrl 0.14.1, in its own virtual environment and subprocess: it pins another tensordict);
* ``loop``: a plain Python loop over the 1000 steps, one batched torch update per step.

Each figure is the median time of one call over the repeats; the ratios are computed from
those medians. The issue asks Cadence to be at least as fast as torchrl and at least 20x the
loop. (The DDPG-update part of this benchmark is added with the losses.)

Usage::

    python benchmarks/bench_objectives.py [--repeats 20] [--threads N] [--skip-reference]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import REPO_ROOT, find_reference_python  # noqa: E402

# Runs in either library's python; prints {"case": seconds, ...} as its last line.
MEASURE_SCRIPT = r'''
import json, statistics, sys, time
import torch

library, repeats, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if threads > 0:
    torch.set_num_threads(threads)
if library == "cadence":
    from cadence.objectives.value.functional import vec_generalized_advantage_estimate, vec_td_lambda_return_estimate
else:
    from torchrl.objectives.value.functional import vec_generalized_advantage_estimate, vec_td_lambda_return_estimate

generator = torch.Generator().manual_seed(0)
shape = (256, 1000, 1)
value, next_value, reward = (torch.randn(shape, generator=generator) for _ in range(3))
done = torch.rand(shape, generator=generator) < 0.01
terminated = done & (torch.rand(shape, generator=generator) < 0.5)


def loop_td_lambda():
    # G_t = r_t + gamma ((1 - lmbda) V_{t+1} + lmbda G_{t+1}) inside a trajectory
    out = torch.empty_like(reward)
    following = torch.zeros_like(reward[:, 0])
    for t in range(reward.shape[1] - 1, -1, -1):
        stop = (done[:, t] | terminated[:, t]).float() if t < reward.shape[1] - 1 else torch.ones_like(following)
        bootstrap = 0.99 * (~terminated[:, t]).float() * next_value[:, t]
        following = reward[:, t] + bootstrap * (1 - 0.95 * (1 - stop)) + 0.99 * 0.95 * (1 - stop) * following
        out[:, t] = following
    return out


def loop_gae():
    out = torch.empty_like(reward)
    following = torch.zeros_like(reward[:, 0])
    for t in range(reward.shape[1] - 1, -1, -1):
        stop = (done[:, t] | terminated[:, t]).float() if t < reward.shape[1] - 1 else torch.ones_like(following)
        delta = reward[:, t] + 0.99 * (~terminated[:, t]).float() * next_value[:, t] - value[:, t]
        following = delta + 0.99 * 0.95 * (1 - stop) * following
        out[:, t] = following
    return out


cases = {
    "td_lambda": lambda: vec_td_lambda_return_estimate(0.99, 0.95, next_value, reward, done, terminated),
    "gae": lambda: vec_generalized_advantage_estimate(0.99, 0.95, value, next_value, reward, done, terminated),
}
if library == "cadence":
    cases["loop td_lambda"] = loop_td_lambda
    cases["loop gae"] = loop_gae
    # the loops are the references the vectorized versions must match
    torch.testing.assert_close(cases["td_lambda"](), loop_td_lambda(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cases["gae"]()[0], loop_gae(), atol=1e-5, rtol=1e-5)
results = {"threads": torch.get_num_threads()}
for name, run in cases.items():
    run()
    times = []
    for _ in range(repeats if not name.startswith("loop") else max(3, repeats // 4)):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    results[name] = statistics.median(times)
print(json.dumps(results))
'''


def measure(python: str, library: str, repeats: int, threads: int) -> dict[str, float]:
    result = subprocess.run(
        [python, "-c", MEASURE_SCRIPT, library, str(repeats), str(threads)],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{library} measurement failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--reference-python", default=None)
    args = parser.parse_args()

    cadence = measure(sys.executable, "cadence", args.repeats, args.threads)
    reference, why = (None, "--skip-reference") if args.skip_reference else find_reference_python(args.reference_python)
    torchrl = measure(reference, "torchrl", args.repeats, args.threads) if reference else None
    print(f"value estimates on [256, 1000, 1], {cadence['threads']} torch threads; reference: {why}")
    print(f"{'case':<10} {'cadence ms':>11} {'torchrl ms':>11} {'loop ms':>9} {'vs torchrl':>11} {'vs loop':>8}")
    for case in ("td_lambda", "gae"):
        ours, loop = cadence[case], cadence[f"loop {case}"]
        theirs = torchrl[case] if torchrl else float("nan")
        print(
            f"{case:<10} {ours * 1e3:>11.2f} {theirs * 1e3:>11.2f} {loop * 1e3:>9.2f} "
            f"{theirs / ours:>10.1f}x {loop / ours:>7.1f}x"
        )


if __name__ == "__main__":
    main()
