"""``rollout``: the step loop every env offers.

``EnvBase`` mixes :class:`EnvRollouts` in. ``rollout`` with random actions or a policy
runs the time loop on plain tensors (:mod:`cadence.envs.values_loop`) wherever the env
steps on values: the policy compiled to a step on the entries' dict
(:func:`~cadence.modules.tensor_view.compile_policy`) or called on one tensordict of them,
random actions drawn at the start and stepped in stretches up to each done step where the
env's kernel takes them. Anything else (a callback, an input to start from, an env with
its own ``step``) runs the loop on tensordicts here (``_tensordict_loop``, which the
collectors' generic runner drives too): a tensordict per step, stacked in chunks.
``ParallelEnv`` lets its workers roll out on their own (``_rollout_on_workers``).

Examples:
    >>> from cadence.envs.custom import PendulumEnv
    >>> PendulumEnv().rollout(3)["next", "th"].shape
    torch.Size([3])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from cadence.envs.env_specs import as_tuple_key
from cadence.envs.utils import policy_on_device
from cadence.modules.tensor_view import TensorStep, policy_step

if TYPE_CHECKING:  # pragma: no cover - type hints only (the env core builds on this module)
    from cadence.envs.common import EnvBase
    from cadence.envs.values_loop import ValuesLoop

__all__ = ["EnvRollouts"]

Policy = Callable[[TensorDictBase], TensorDictBase | None]


#: the generic loop stacks its steps this many at a time: a rollout that kept every step's
#: tensordict alive to the end would hand Python's garbage collector thousands of objects
#: to promote and scan (as the values loop's ``Recording`` explains)
_CHUNK_STEPS = 64


def _name_time_dim(result: TensorDictBase) -> None:
    """Names the last batch dim of a rollout ``"time"``.

    tensordict cannot name the dims of a lazy stack whose entries differ in shape across
    its parts (heterogeneous agents gathered from several workers): those stay unnamed.
    """
    try:
        result.names = [None] * (result.batch_dims - 1) + ["time"]
    except RuntimeError:
        if not isinstance(result, LazyStackedTensorDict):
            raise


class EnvRollouts:
    """``rollout`` and its shortcuts, mixed into ``EnvBase``: they use its ``reset``,
    ``step``, ``_step_mdp``, ``_reset_done`` and specs.

    Examples:
        >>> from cadence.envs import EnvBase
        >>> issubclass(EnvBase, EnvRollouts)
        True
    """

    def _rollout_on_workers(self: EnvBase, max_steps: int, **request: Any) -> TensorDictBase | None:
        """A rollout that a batch of workers takes on its own (``ParallelEnv``: each worker runs
        the loop over its env); ``None`` (the default): the loop here takes it."""
        return None

    def rollout(
        self: EnvBase,
        max_steps: int,
        policy: Policy | None = None,
        callback: Callable[[EnvBase, TensorDictBase], Any] | None = None,
        *,
        auto_reset: bool = True,
        break_when_any_done: bool = True,
        break_when_all_done: bool = False,
        return_contiguous: bool = True,
        tensordict: TensorDictBase | None = None,
        set_truncated: bool = False,
        auto_cast_to_device: bool = False,
    ) -> TensorDictBase:
        """Runs up to ``max_steps`` steps and returns them stacked on a trailing ``"time"`` dim.

        Args:
            max_steps: the number of steps.
            policy: a callable writing the action(s) into a tensordict (a
                ``TensorDictModule``, say); random actions if ``None``.
            callback: called as ``callback(env, data)`` after each step.
            auto_reset: reset the env first (else ``tensordict`` is the first input).
            break_when_any_done: stop at the first step where any component is done.
            break_when_all_done: stop at the first step where all are done; the
                done components are reset and the rollout goes on otherwise.
            return_contiguous: stack into contiguous tensors; ``False`` gives a lazy
                stack (needed, and chosen anyway, when specs have dynamic dims).
            tensordict: the input of the first reset (or step, without ``auto_reset``).
            set_truncated: mark the last step truncated (and done).
            auto_cast_to_device: hand the policy its input on the device of its
                parameters, and bring its output back to the env's device.

        Returns:
            A tensordict of batch size ``[*batch_size, T]`` with dim names ``[..., "time"]``.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> data = PendulumEnv(batch_size=[2]).rollout(10)
            >>> data.batch_size, data.names
            (torch.Size([2, 10]), [None, 'time'])
        """
        if max_steps < 1:
            raise ValueError(f"rollout() needs max_steps >= 1, got {max_steps}.")
        if auto_cast_to_device and policy is not None:
            policy = policy_on_device(policy, self.device)
        on_workers = self._rollout_on_workers(
            max_steps,
            policy=policy,
            callback=callback,
            auto_reset=auto_reset,
            break_when_any_done=break_when_any_done,
            break_when_all_done=break_when_all_done,
            return_contiguous=return_contiguous,
            tensordict=tensordict,
            set_truncated=set_truncated,
        )
        if on_workers is not None:
            return on_workers
        if (callback is None and auto_reset and tensordict is None and return_contiguous
                and not self._has_dynamic_specs()):
            from cadence.envs.values_loop import ValuesLoop, values_loop_applies  # it builds on this module

            # random actions, or the policy as a step on the entries' dict: compiled to its
            # arithmetic, or called on one tensordict of them
            step = None if policy is None else policy_step(policy, self.batch_size)
            if (policy is None or step is not None) and values_loop_applies(self):
                return self._values_rollout(ValuesLoop(self), max_steps, break_when_any_done,
                                            break_when_all_done, set_truncated, step)
        if auto_reset:
            current = self.reset(tensordict)
        elif tensordict is None:
            raise ValueError("rollout(auto_reset=False) needs the first input as `tensordict`.")
        else:
            current = tensordict
        act = self.rand_action if policy is None else policy
        result, _ = self._tensordict_loop(current, max_steps, act, callback, break_when_any_done=break_when_any_done,
                                          break_when_all_done=break_when_all_done,
                                          contiguous=return_contiguous and not self._has_dynamic_specs())
        if set_truncated:
            self._mark_truncated(result)
        return result

    def _tensordict_loop(
        self: EnvBase,
        current: TensorDictBase,
        steps: int,
        act: Policy,
        callback: Callable[[EnvBase, TensorDictBase], Any] | None = None,
        *,
        break_when_any_done: bool = False,
        break_when_all_done: bool = False,
        reset_after_last: bool = False,
        contiguous: bool = True,
    ) -> tuple[TensorDictBase, TensorDictBase | None]:
        """The time loop on TensorDicts, for what the loop on values does not take (a
        callback, an input to start from, an env with its own ``step``...): ``act`` then
        ``step`` from the input ``current``, each step's data stacked in chunks on a
        trailing ``"time"`` dim, ``callback(env, data)`` after each step. The done
        components are reset between steps (and after the last one, with
        ``reset_after_last``: a collector's next batch goes on from there).

        Returns:
            The steps' data and the next step's input (``None`` where the loop stopped at a
            done step or leaves the env as its last step left it).
        """
        recorded: list[TensorDictBase] = []
        chunks: list[TensorDictBase] = []
        done_key = ("next", *as_tuple_key(self.done_key))
        following: TensorDictBase | None = None
        breaks = break_when_any_done or break_when_all_done
        for t in range(steps):
            returned = act(current)
            current = returned if returned is not None else current
            goes_on = t + 1 < steps or reset_after_last
            if goes_on and not breaks:  # the manual loop's step (on values where the env allows)
                data, following = self.step_and_maybe_reset(current)
            else:
                data, following = self.step(current), None
            recorded.append(data)
            if contiguous and len(recorded) == _CHUNK_STEPS:
                chunks.append(self._stack_steps(recorded, True))
                recorded = []
            if callback is not None:
                callback(self, data)
            if breaks:
                done = data.get(done_key)
                if (break_when_any_done and done.any()) or (break_when_all_done and done.all()):
                    break
                if goes_on:
                    following = self._step_mdp(data)
                    if break_when_any_done:
                        self._auto_reset_stash = None
                    else:
                        following, _ = self._reset_done(following)
            if following is not None:
                current = following
        if recorded:
            chunks.append(self._stack_steps(recorded, contiguous))
        result = chunks[0] if len(chunks) == 1 else torch.cat(chunks, dim=chunks[0].batch_dims - 1)
        _name_time_dim(result)
        return result, following

    def _values_rollout(
        self: EnvBase, loop: ValuesLoop, max_steps: int, break_when_any_done: bool, break_when_all_done: bool,
        set_truncated: bool, policy: TensorStep | None = None,
    ) -> TensorDictBase:
        """The generic rollout loop below (from a reset), on plain tensors: ``policy`` as a
        step on the entries' dict, or random actions (drawn at the start, after the reset,
        where the loop takes them in stretches)."""
        recording = loop.recording()
        root = loop.entries(self.reset())
        actions = loop.draw_ahead(max_steps) if policy is None else None
        loop.run(root, max_steps, policy, recording, actions=actions, break_when_any_done=break_when_any_done,
                 break_when_all_done=break_when_all_done, reset_after_last=False)
        result = loop.assemble(recording)
        if set_truncated:
            self._mark_truncated(result)
        return result

    @staticmethod
    def _stack_steps(steps: list[TensorDictBase], contiguous: bool) -> TensorDictBase:
        """Stacks the steps on a new dim after their batch dims.

        The generic loop keeps each step's tensordict and stacks once at the end: one
        ``torch.stack`` per entry costs a fraction of copying every entry into a
        preallocated buffer at every step (about 16 us against 80 us a step for a
        gymnasium env on the development machine). The loop on values writes into
        preallocated arrays instead, where the env's kernel does.
        """
        dim = steps[0].batch_dims
        if not contiguous:
            return LazyStackedTensorDict.lazy_stack(steps, dim=dim)
        try:
            return torch.stack(steps, dim=dim)
        except RuntimeError as err:
            raise ValueError(
                f"The rollout's steps do not stack ({err}); the env's data does not keep to its specs: "
                f"check_env_specs(env) names the entry."
            ) from err

    def _mark_truncated(self: EnvBase, result: TensorDictBase) -> None:
        truncated = [k for k in self.done_keys if as_tuple_key(k)[-1] == "truncated"]
        if not truncated:
            raise RuntimeError(
                f"rollout(set_truncated=True) needs a 'truncated' entry in the done spec of "
                f"{type(self).__name__}; its done keys are {self.done_keys}."
            )
        for key in truncated:
            for name in ("truncated", "done"):
                value = result.get(("next", *as_tuple_key(key)[:-1], name))
                value.select(result.batch_dims - 1, -1).fill_(True)
