"""Plain per-step Python references of the return and advantage estimates (the tests' oracle).

Each works on nested lists of floats/bools ``[row][t]`` and spells every case out:
terminated steps take no bootstrap, done (or the data's last) steps stop the return.
"""

from __future__ import annotations

import torch


def _rows(tensor: torch.Tensor) -> list[list[float]]:
    """``[*B, T, 1]`` -> ``[row][t]`` (time_dim -2)."""
    return tensor.squeeze(-1).reshape(-1, tensor.shape[-2]).double().tolist()


def _per_step(gamma: float | torch.Tensor, like: torch.Tensor) -> list[list[float]]:
    if isinstance(gamma, torch.Tensor):
        return _rows(gamma.expand_as(like))
    return [[float(gamma)] * like.shape[-2] for _ in range(like[..., 0, 0].numel())]


def lambda_return(gamma, lmbda, next_value, reward, done, terminated):
    """TD(lambda) return, ``[*B, T, 1]`` float64."""
    gammas = _per_step(gamma, reward)
    out = []
    for g, nv, r, d, te in zip(gammas, _rows(next_value), _rows(reward), _rows(done), _rows(terminated)):
        row = [0.0] * len(r)
        following = 0.0
        for t in range(len(r) - 1, -1, -1):
            if te[t]:
                value = r[t]
            elif d[t] or t == len(r) - 1:
                value = r[t] + g[t] * nv[t]
            else:
                value = r[t] + g[t] * ((1 - lmbda) * nv[t] + lmbda * following)
            row[t] = following = value
        out.append(row)
    return torch.tensor(out, dtype=torch.float64).reshape(reward.shape)


def gae(gamma, lmbda, value, next_value, reward, done, terminated):
    """(advantage, value_target), ``[*B, T, 1]`` float64."""
    gammas = _per_step(gamma, reward)
    out = []
    rows = zip(gammas, _rows(value), _rows(next_value), _rows(reward), _rows(done), _rows(terminated))
    for g, v, nv, r, d, te in rows:
        row = [0.0] * len(r)
        following = 0.0
        for t in range(len(r) - 1, -1, -1):
            delta = r[t] + (0.0 if te[t] else g[t] * nv[t]) - v[t]
            if d[t] or te[t] or t == len(r) - 1:
                advantage = delta
            else:
                advantage = delta + g[t] * lmbda * following
            row[t] = following = advantage
        out.append(row)
    advantage = torch.tensor(out, dtype=torch.float64).reshape(reward.shape)
    return advantage, advantage + value.double()


def td0_return(gamma, next_value, reward, terminated):
    gammas = _per_step(gamma, reward)
    out = [
        [r[t] + (0.0 if te[t] else g[t] * nv[t]) for t in range(len(r))]
        for g, nv, r, te in zip(gammas, _rows(next_value), _rows(reward), _rows(terminated))
    ]
    return torch.tensor(out, dtype=torch.float64).reshape(reward.shape)
