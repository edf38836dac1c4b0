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
loop.

The second part times one full DDPG update: the loss (TD(0) target from target networks,
critic and actor losses), backward, an Adam step for the actor and one for the critic and a
soft update of both targets (tau 0.005), on a batch of 256 HalfCheetah-sized transitions
(observation 17, action 6) with [256, 256] MLPs, three ways: ``plain`` (the same update
hand-written in plain torch on tensors: the floor), ``cadence`` (``DDPGLoss`` +
``SoftUpdate``) and ``torchrl`` (its ``DDPGLoss`` + ``SoftUpdate``). The issue asks Cadence
to take at most 1.2x the plain update's time.

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


# One DDPG update in plain torch or in either library; prints {"update": seconds, ...}.
UPDATE_SCRIPT = r'''
import copy, json, statistics, sys, time
import torch
from torch import nn

library, repeats, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if threads > 0:
    torch.set_num_threads(threads)
torch.manual_seed(0)
batch, obs_dim, act_dim, gamma, tau = 256, 17, 6, 0.99, 0.005


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, act_dim), nn.Tanh())

    def forward(self, observation):
        return self.net(observation)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, 1))

    def forward(self, observation, action):
        return self.net(torch.cat([observation, action], -1))


observation, next_observation = torch.randn(batch, obs_dim), torch.randn(batch, obs_dim)
action, reward = torch.rand(batch, act_dim) * 2 - 1, torch.randn(batch, 1)
done = torch.rand(batch, 1) < 0.01


def plain_update_fn():
    # the floor: the same update hand-written on tensors
    actor, critic = Actor(), Critic()
    actor_target, critic_target = copy.deepcopy(actor), copy.deepcopy(critic)
    for p in [*actor_target.parameters(), *critic_target.parameters()]:
        p.requires_grad_(False)
    actor_optim = torch.optim.Adam(actor.parameters(), lr=1e-4)
    critic_optim = torch.optim.Adam(critic.parameters(), lr=1e-3)
    sources = [*actor.parameters(), *critic.parameters()]
    targets = [*actor_target.parameters(), *critic_target.parameters()]

    def update():
        with torch.no_grad():
            target = reward + gamma * (~done) * critic_target(next_observation, actor_target(next_observation))
        loss_value = (critic(observation, action) - target).pow(2).mean()
        critic_params = list(critic.parameters())
        for p in critic_params:
            p.requires_grad_(False)
        loss_actor = -critic(observation, actor(observation)).mean()
        for p in critic_params:
            p.requires_grad_(True)
        actor_optim.zero_grad()
        critic_optim.zero_grad()
        (loss_value + loss_actor).backward()
        actor_optim.step()
        critic_optim.step()
        with torch.no_grad():
            torch._foreach_lerp_(targets, sources, tau)

    return update


def library_update_fn():
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule
    if library == "cadence":
        from cadence.objectives import DDPGLoss, SoftUpdate
    else:
        from torchrl.objectives import DDPGLoss, SoftUpdate
    actor_module = TensorDictModule(Actor(), ["observation"], ["action"])
    critic_module = TensorDictModule(Critic(), ["observation", "action"], ["state_action_value"])
    loss = DDPGLoss(actor_module, critic_module)
    if library == "torchrl":
        loss.make_value_estimator(gamma=gamma)
    updater = SoftUpdate(loss, tau=tau)
    actor_optim = torch.optim.Adam(loss.actor_network_params.values(True, True), lr=1e-4)
    critic_optim = torch.optim.Adam(loss.value_network_params.values(True, True), lr=1e-3)
    data = TensorDict({"observation": observation, "action": action,
                       "next": {"observation": next_observation, "reward": reward, "done": done,
                                "terminated": done}}, [batch])

    def update():
        losses = loss(data.copy())
        actor_optim.zero_grad()
        critic_optim.zero_grad()
        (losses["loss_actor"] + losses["loss_value"]).backward()
        actor_optim.step()
        critic_optim.step()
        updater.step()

    return update


# both in this process, in alternating rounds, so that the machine's drifts hit them alike
updates = {"plain": plain_update_fn(), library: library_update_fn()}
times = {name: [] for name in updates}
for name, update in updates.items():
    for _ in range(10):
        update()
for _ in range(10):
    for name, update in updates.items():
        start = time.perf_counter()
        for _ in range(max(1, repeats // 10)):
            update()
        times[name].append((time.perf_counter() - start) / max(1, repeats // 10))
print(json.dumps({**{name: statistics.median(t) for name, t in times.items()}, "threads": torch.get_num_threads()}))
'''


def measure(python: str, library: str, repeats: int, threads: int, script: str = MEASURE_SCRIPT) -> dict[str, float]:
    result = subprocess.run(
        [python, "-c", script, library, str(repeats), str(threads)],
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
    print()
    print("one DDPG update (batch 256, [256, 256] MLPs), each library against plain torch in its own process:")
    for lib, python in (("cadence", sys.executable), ("torchrl", reference)):
        if python is None:
            continue
        times = measure(python, lib, args.repeats * 10, args.threads, UPDATE_SCRIPT)
        print(f"  {lib}: {times[lib] * 1e3:.2f} ms, plain {times['plain'] * 1e3:.2f} ms: "
              f"{times[lib] / times['plain']:.2f}x plain")


if __name__ == "__main__":
    main()
