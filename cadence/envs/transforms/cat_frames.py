"""Frame stacking: ``CatFrames``.

``CatFrames`` concatenates the last ``N`` frames of an observation along a (negative)
dim, so that a policy sees a short history (the frame stacking of DQN on Atari). It
works in three places:

* in an env, where the stack of the previous step is read back from each step's input
  (it is part of the state spec), so that batched envs, partial resets and clones need
  no hidden per-env buffer;
* on trajectories ``[*B, T]`` (a replay buffer's sample, a rollout of raw frames),
  where it builds the stacks of every step at once, starting over at each episode;
* on an env's rollout shortcut (``steps_over_time``), which stacks a stretch of steps
  at once with the same results as the step-by-step loop.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.envs.transforms import TransformedEnv
    >>> from cadence.envs.transforms.cat_frames import CatFrames
    >>> env = TransformedEnv(GymEnv("CartPole-v1"), CatFrames(N=3, dim=-1, in_keys=["observation"]))
    >>> data = env.rollout(2)
    >>> data["next", "observation"].shape  # three 4-d observations side by side
    torch.Size([2, 12])
    >>> first = data["observation"][0]  # after the reset: three copies of the first observation
    >>> bool((first.reshape(3, 4) == first[-4:]).all())
    True
    >>> bool((data["next", "observation"][0, :8] == first[4:]).all())  # a step shifts the stack
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from cadence.data import Bounded, Composite, TensorSpec
from cadence.envs.common import _expand_mask
from cadence.envs.env_specs import as_tuple_key, unwrap_key
from cadence.envs.transforms.base import NestedKey, Transform

__all__ = ["CatFrames"]

_PADDINGS = ("same", "constant")


class CatFrames(Transform):
    """Concatenates successive observation frames into a single tensor.

    The output at each ``out_key`` holds the last ``N`` frames read at the matching
    ``in_key``, oldest first, concatenated along ``dim`` (whose size becomes ``N``
    times the frame's). Where fewer than ``N`` frames of the episode exist, the stack
    is padded in front: with copies of the episode's first frame (``padding="same"``)
    or with ``padding_value`` (``padding="constant"``).

    **In an env.** A reset writes the padded first frame (``N`` copies of it, or
    ``N - 1`` padding frames and it); with a ``"_reset"`` mask only the selected
    components start over. A step drops the oldest frame of the stack found at
    ``out_key`` in the step's input and appends the new frame. The stack is declared in
    the observation spec and in the state spec, so that batched and parallel envs carry
    it from step to step; a step whose input holds no stack starts one, as a reset would
    (padding before the new frame).

    **On trajectories.** Called on a tensordict of batch ``[*B, T]`` (time last), it
    builds the stacks of every step, for ``in_key`` at the root and under ``"next"``
    (those present). An episode starts at ``t = 0``, after a step whose
    ``("next", done_key)`` is set, and wherever an ``"is_init"`` entry is ``True``; the
    stacks of a step never reach into another episode. The root frames are needed to
    build the ``"next"`` stacks (the first one holds the episode's first frame). With
    ``as_inverse=True`` this happens in ``inv`` (a replay buffer stacks the frames as
    they are written) and the forward call leaves the data as it is.

    Args:
        N: the number of frames to concatenate (>= 1).
        dim: the dim of a frame along which to concatenate; it must be negative (it
            counts from the end, whatever the batch dims).
        in_keys: the frames (``["pixels"]``).
        out_keys: where the stacks go (``in_keys``).
        padding: ``"same"`` (repeat the episode's first frame) or ``"constant"``.
        padding_value: the value of the padding frames with ``padding="constant"``.
        as_inverse: stack trajectories in ``inv`` instead of in the forward call (a
            replay-buffer transform; an env refuses it).
        reset_key: the ``"_reset"`` entry that selects the components a partial reset
            starts over; by default the env's only reset key (an env with done signals
            at several levels needs it).
        done_key: the done entry that ends episodes in trajectories (``"done"``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> frames = torch.arange(5.0).reshape(1, 5, 1)  # one trajectory of five 1-d frames
        >>> done = torch.tensor([False, True, False, False, False]).reshape(1, 5, 1)
        >>> data = TensorDict({"obs": frames, ("next", "obs"): frames + 1, ("next", "done"): done}, [1, 5])
        >>> out = CatFrames(N=2, dim=-1, in_keys=["obs"])(data)
        >>> out["obs"][0].tolist()  # a new episode starts at t = 2
        [[0.0, 0.0], [0.0, 1.0], [2.0, 2.0], [2.0, 3.0], [3.0, 4.0]]
        >>> out["next", "obs"][0].tolist()
        [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [3.0, 4.0], [4.0, 5.0]]
    """

    def __init__(
        self,
        N: int,
        dim: int,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        padding: str = "same",
        padding_value: float = 0,
        as_inverse: bool = False,
        reset_key: NestedKey | None = None,
        done_key: NestedKey | None = None,
    ) -> None:
        if isinstance(N, bool) or not isinstance(N, int) or N < 1:
            raise ValueError(f"CatFrames: N must be an int >= 1, got {N!r}.")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim >= 0:
            raise ValueError(
                f"CatFrames: dim must be a negative int (counted from the end of a frame, so that it holds "
                f"whatever the batch dims), got {dim!r}."
            )
        if padding not in _PADDINGS:
            raise ValueError(f"CatFrames: padding must be one of {_PADDINGS}, got {padding!r}.")
        super().__init__(["pixels"] if in_keys is None else in_keys, out_keys)
        self.N = N
        self.dim = dim
        self.padding = padding
        self.padding_value = padding_value
        self.as_inverse = as_inverse
        self.reset_key = reset_key
        self.done_key: NestedKey = "done" if done_key is None else done_key
        self._out_specs: dict[NestedKey, TensorSpec] = {}
        self._reset_key: NestedKey | None = reset_key

    # ------------------------------------------------------------------ tensors
    def _pad_frame(self, frame: torch.Tensor) -> torch.Tensor:
        """The frame that stands before ``frame`` when it starts an episode."""
        if self.padding == "same":
            return frame
        return torch.full_like(frame, self.padding_value)

    def _start_stack(self, frame: torch.Tensor) -> torch.Tensor:
        """The stack of an episode whose first frame is ``frame``."""
        pad = self._pad_frame(frame)
        return torch.cat([pad] * (self.N - 1) + [frame], self.dim)

    def _frame_size(self, stack: torch.Tensor, frame: torch.Tensor, key: NestedKey) -> int:
        """The size of one frame along ``dim``, checking that ``stack`` holds ``N`` of them."""
        if -self.dim > frame.ndim:
            raise ValueError(
                f"CatFrames: dim={self.dim} does not exist in {key!r}, whose frames have shape {tuple(frame.shape)}."
            )
        size = frame.shape[self.dim]
        expected = list(frame.shape)
        expected[self.dim] = size * self.N
        if list(stack.shape) != expected:
            raise ValueError(
                f"CatFrames: the previous stack at {key!r} has shape {tuple(stack.shape)}; with frames of shape "
                f"{tuple(frame.shape)} and N={self.N} it should be {tuple(expected)}."
            )
        return size

    def _push(self, stack: torch.Tensor, frame: torch.Tensor, key: NestedKey) -> torch.Tensor:
        """``stack`` without its oldest frame, with ``frame`` appended."""
        size = self._frame_size(stack, frame, key)
        kept = stack.narrow(self.dim, size, size * (self.N - 1)).to(frame)
        return torch.cat([kept, frame], self.dim)

    # ------------------------------------------------------------------ env path
    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self._refuse_inverse_in_env()
        mask = None
        if tensordict is not None and self._reset_key is not None:
            mask = tensordict.get(self._reset_key, None)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            frame = tensordict_reset.get(in_key, None)
            if frame is None:
                continue
            stack = self._start_stack(frame)
            previous = None if tensordict is None or mask is None else tensordict.get(out_key, None)
            if previous is not None and previous.shape == stack.shape:
                # a partial reset: the spared components keep their stacks
                stack = torch.where(_expand_mask(mask.to(torch.bool), stack.shape), stack, previous.to(stack))
            tensordict_reset.set(out_key, stack)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._refuse_inverse_in_env()
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            frame = next_tensordict.get(in_key, None)
            if frame is None:
                continue
            previous = tensordict.get(out_key, None)
            if previous is None:
                next_tensordict.set(out_key, self._start_stack(frame))
            else:
                next_tensordict.set(out_key, self._push(previous, frame, out_key))
        return next_tensordict

    steps_over_time = True  # the stacks of a stretch are windows over (previous stack, new frames)
    steps_on_values = True  # get and set

    def _step_over_time(self, tensordict: TensorDictBase, next_steps: TensorDictBase) -> TensorDictBase:
        self._refuse_inverse_in_env()
        time_dim = next_steps.batch_dims - 1
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            frames = next_steps.get(in_key, None)  # [*B, T, *F]
            if frames is None:
                continue
            steps = frames.shape[time_dim]
            first = frames.select(time_dim, 0)
            previous = tensordict.get(out_key, None)
            if previous is None:  # as _step: the first new frame starts the stack
                previous = torch.cat([self._pad_frame(first)] * self.N, self.dim)
            size = self._frame_size(previous, first, out_key)
            frame_dim = first.ndim + self.dim  # the concatenation dim, counted in a frame with batch dims
            # the previous stack as N frames on a time dim, followed by the new frames
            old = previous.to(frames).unflatten(frame_dim, (self.N, size)).movedim(frame_dim, time_dim)
            sequence = torch.cat([old, frames], time_dim)  # [*B, N + T, *F]
            # window t holds frames t+1 .. t+N of the sequence (the window at 0 is the previous stack)
            windows = sequence.unfold(time_dim, self.N, 1).narrow(time_dim, 1, steps)  # [*B, T, *F, N]
            stack_dim = frames.ndim + self.dim  # the concatenation dim in the frames with time
            windows = windows.movedim(-1, stack_dim)  # [..., N, d, ...]
            next_steps.set(out_key, windows.flatten(stack_dim, stack_dim + 1))
        return next_steps

    def _refuse_inverse_in_env(self) -> None:
        if self.as_inverse:
            raise ValueError(
                "CatFrames(as_inverse=True) stacks trajectories on the inverse path (a replay-buffer transform); "
                "in an env use as_inverse=False."
            )

    # ------------------------------------------------------------------ trajectories
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Stacks the frames of trajectories ``[*B, T]`` (unless ``as_inverse``)."""
        if self.as_inverse:
            return tensordict
        return self._stack_trajectories(tensordict)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.as_inverse:
            return tensordict
        return self._stack_trajectories(tensordict)

    def _episode_mask(self, tensordict: TensorDictBase, key: NestedKey, batch: torch.Size) -> torch.Tensor | None:
        """The boolean entry at ``key`` reduced to the batch dims (``None`` if absent)."""
        value = tensordict.get(key, None)
        if value is None:
            return None
        value = value.to(torch.bool)
        while value.ndim > len(batch) and value.shape[-1] == 1:
            value = value.squeeze(-1)
        if value.shape != batch:
            raise ValueError(
                f"CatFrames: {key!r} has shape {tuple(tensordict.get(key).shape)}; on trajectories of batch "
                f"{tuple(batch)} it must have the batch shape (and perhaps a trailing 1)."
            )
        return value

    def _stack_trajectories(self, tensordict: TensorDictBase) -> TensorDictBase:
        batch = tensordict.batch_size
        if len(batch) < 1:
            raise ValueError(
                "CatFrames: on data outside an env it stacks trajectories of batch [*B, T] (time last); the "
                "tensordict has no batch dims."
            )
        time_dim = len(batch) - 1
        steps = batch[-1]
        # where each step's episode starts
        starts = torch.zeros(batch, dtype=torch.bool, device=tensordict.device)
        starts.select(time_dim, 0).fill_(True)
        done = self._episode_mask(tensordict, ("next", *as_tuple_key(self.done_key)), batch)
        if done is not None:
            starts.narrow(time_dim, 1, steps - 1).logical_or_(done.narrow(time_dim, 0, steps - 1).to(starts.device))
        is_init = self._episode_mask(tensordict, "is_init", batch)
        if is_init is not None:
            starts |= is_init.to(starts.device)
        times = torch.arange(steps, device=starts.device).expand(batch)
        episode_start = torch.where(starts, times, torch.zeros_like(times)).cummax(time_dim).values
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            frames = tensordict.get(in_key, None)
            next_key = ("next", *as_tuple_key(in_key))
            next_frames = tensordict.get(next_key, None)
            if next_frames is not None and frames is None:
                raise KeyError(
                    f"CatFrames: the trajectories hold {next_key!r} but not {in_key!r}; the root frames are needed "
                    f"to stack the 'next' frames (the first stack of an episode holds its first frame)."
                )
            if frames is None:
                continue
            if -self.dim > frames.ndim - len(batch):
                raise ValueError(
                    f"CatFrames: dim={self.dim} does not exist in {in_key!r}, whose frames have shape "
                    f"{tuple(frames.shape[len(batch):])} (batch {tuple(batch)})."
                )
            # both from the frames as they came (out_key may be in_key)
            root = self._windows(frames, None, times, episode_start, time_dim)
            if next_frames is not None:
                stacks = self._windows(next_frames, frames, times, episode_start, time_dim)
                tensordict.set(("next", *as_tuple_key(out_key)), stacks)
            tensordict.set(out_key, root)
        return tensordict

    def _windows(
        self,
        frames: torch.Tensor,
        first_frames: torch.Tensor | None,
        times: torch.Tensor,
        episode_start: torch.Tensor,
        time_dim: int,
    ) -> torch.Tensor:
        """The stacks of each step of ``frames`` (``[*B, T, *F]``).

        Root stacks (``first_frames`` is ``None``): slot ``o`` back from the newest holds
        frame ``t - o`` if it belongs to the episode, padding otherwise. Next stacks
        (``first_frames`` are the root frames): frame ``t - o`` of the next frames if it
        belongs to the episode, the episode's first (root) frame just before that, then
        padding.
        """
        extra = frames.ndim - times.ndim

        def gather(source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
            index = index.reshape(*index.shape, *[1] * extra).expand(frames.shape)
            return source.gather(time_dim, index)

        def spread(mask: torch.Tensor) -> torch.Tensor:
            return mask.reshape(*mask.shape, *[1] * extra)

        episode_first = gather(frames if first_frames is None else first_frames, episode_start)
        padding = self._pad_frame(episode_first)
        slots = []
        for back in range(self.N - 1, -1, -1):
            source = times - back
            inside = source >= episode_start
            value = torch.where(spread(inside), gather(frames, torch.where(inside, source, episode_start)), padding)
            if first_frames is not None:
                value = torch.where(spread(source == episode_start - 1), episode_first, value)
            slots.append(value)
        return torch.cat(slots, self.dim)

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._refuse_inverse_in_env()
        if self.reset_key is None:
            done_spec = output_spec["full_done_spec"]
            prefixes = sorted(
                {as_tuple_key(k)[:-1] for k in done_spec.keys(True, True) if as_tuple_key(k)[-1] == "done"}, key=len
            )
            if len(prefixes) > 1:
                levels = [unwrap_key(p + ("done",)) for p in prefixes]
                raise ValueError(
                    f"CatFrames: the env has done signals at several levels ({levels}); pass reset_key= to say "
                    f"which '_reset' entry restarts the stacks."
                )
            self._reset_key = unwrap_key(prefixes[0] + ("_reset",)) if prefixes else None
        else:
            self._reset_key = self.reset_key
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        batch_dims = len(observation_spec.shape)
        self._out_specs = {}
        observations = {as_tuple_key(k) for k in observation_spec.keys(True, True)}
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if as_tuple_key(in_key) not in observations:
                raise KeyError(
                    f"CatFrames stacks observations; {in_key!r} is not one (the observation spec holds "
                    f"{sorted(map(str, observation_spec.keys(True, True)))})."
                )
            leaf = observation_spec[in_key]
            spec = self._stack_spec(leaf, batch_dims, in_key)
            self._out_specs[out_key] = spec
            observation_spec[out_key] = spec
        return observation_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # the stacks are read back at the next step: an input of the env
        for out_key, spec in self._out_specs.items():
            state_spec[out_key] = spec.clone()
        return state_spec

    def _stack_spec(self, leaf: TensorSpec, batch_dims: int, key: NestedKey) -> TensorSpec:
        frame_dims = leaf.ndim - batch_dims
        position = leaf.ndim + self.dim
        if -self.dim > frame_dims or position >= leaf._batch_ndim():
            raise ValueError(
                f"CatFrames: dim={self.dim} is not a dim of the frames at {key!r} (spec shape {tuple(leaf.shape)}, "
                f"env batch dims {batch_dims}): expected a negative dim within the frame's {frame_dims} dim(s)"
                f"{' and outside its domain dims' if leaf._batch_ndim() < leaf.ndim else ''}."
            )
        if leaf.shape[position] == -1:
            raise ValueError(f"CatFrames: the frames at {key!r} have a dynamic (-1) size along dim={self.dim}.")
        shape = list(leaf.shape)
        shape[position] *= self.N
        params = leaf._map_params(lambda t: torch.cat([t] * self.N, position))
        if isinstance(leaf, Bounded) and self.padding == "constant":
            # the padding frames may lie outside the frames' bounds
            pad = torch.as_tensor(self.padding_value, dtype=leaf.dtype, device=leaf.device)
            params["low"] = torch.cat([leaf.low.clamp(max=pad)] * (self.N - 1) + [leaf.low], position)
            params["high"] = torch.cat([leaf.high.clamp(min=pad)] * (self.N - 1) + [leaf.high], position)
        return leaf._replace(torch.Size(shape), params)

    def __repr__(self) -> str:
        return (
            f"CatFrames(N={self.N}, dim={self.dim}, in_keys={self.in_keys}, out_keys={self.out_keys}, "
            f"padding={self.padding!r}, padding_value={self.padding_value}, as_inverse={self.as_inverse})"
        )
