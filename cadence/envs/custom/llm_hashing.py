"""Text generation as an env: the observation is a hash of the token sequence so far.

Each step appends one token (the action) to the sequence; the env writes the sequence,
its hash and, optionally, its text. The hash names a token chain in one ``int64``, so
that a tree search can key its nodes by it or a buffer can spot repeated chains.

The tokenizer is the user's: a ``tokenizers.Tokenizer``, a ``transformers`` tokenizer,
any object with ``encode``/``decode``, or a callable from text to token ids. Without
one the env uses :class:`ByteTokenizer` (UTF-8 bytes, 256 tokens), so nothing is
downloaded.

Examples:
    >>> import torch
    >>> from cadence.envs.custom.llm_hashing import LLMHashingEnv
    >>> env = LLMHashingEnv()  # the byte-level tokenizer
    >>> td = env.make_tensordict("Hi")
    >>> td["observation"].tolist(), td["text"]
    ([72, 105], 'Hi')
    >>> td = env.step(td.set("action", torch.tensor([33])))["next"]
    >>> td["text"], bool(td["hash"] == env.make_tensordict("Hi!")["hash"])
    ('Hi!', True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.tensorclass import NonTensorStack

from cadence._utils import quoted
from cadence.data import Categorical, Composite, NonTensor, Unbounded
from cadence.envs.common import EnvBase

__all__ = ["ByteTokenizer", "LLMHashingEnv", "SequenceHash"]

NestedKey = str | tuple[str, ...]
DeviceLike = torch.device | str | int

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (a bijection with full avalanche), on ``uint64``
    arrays; numpy's unsigned products wrap modulo 2**64, as the finaliser asks."""
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xFF51AFD7ED558CCD)
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xC4CEB9FE1A85EC53)
    return values ^ (values >> np.uint64(33))


class SequenceHash:
    """The default hash of token sequences: a 64-bit value folded over the tokens.

    ``h = seed``, then for each token ``h = mix(h ^ token)`` with MurmurHash3's 64-bit
    finaliser as ``mix``; the result is read as an ``int64``. The fold is a function of
    the whole sequence (a sequence hashes the same whether it came as a prompt or token
    by token), and :meth:`extend` continues it from a hash in ``O(new tokens)``.

    Args:
        seed: the value the fold starts from (the hash of the empty sequence).

    Examples:
        >>> import torch
        >>> from cadence.envs.custom.llm_hashing import SequenceHash
        >>> hasher = SequenceHash()
        >>> tokens = torch.tensor([[1, 2, 3], [1, 2, 4]])
        >>> hashes = hasher(tokens)
        >>> hashes.shape, hashes.dtype, bool(hashes[0] != hashes[1])
        (torch.Size([2]), torch.int64, True)
        >>> bool((hasher.extend(hasher(tokens[:, :2]), tokens[:, 2:]) == hashes).all())
        True
    """

    def __init__(self, seed: int = 0xCBF29CE484222325) -> None:
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        # the seed's 64 bits read as an int64, the dtype the hashes travel in
        self._start = int(np.array([self.seed], dtype=np.uint64).view(np.int64)[0])

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """The hashes of sequences ``tokens`` of shape ``(*batch, length)``: shape ``batch``."""
        start = torch.full(tokens.shape[:-1], self._start, dtype=torch.int64, device=tokens.device)
        return self.extend(start, tokens)

    def extend(self, hashes: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Continues the hashes ``hashes`` (shape ``batch``) with the tokens ``tokens``
        (shape ``(*batch, k)``): the hashes of the longer sequences."""
        batch = hashes.shape
        # flat arrays (never numpy scalars, whose wrapping products warn)
        state = hashes.detach().cpu().reshape(-1).numpy().astype(np.int64).view(np.uint64).copy()
        columns = tokens.detach().cpu().reshape(state.shape[0], tokens.shape[-1]).numpy()
        columns = columns.astype(np.int64).view(np.uint64)
        for position in range(columns.shape[-1]):
            state = _mix64(state ^ columns[:, position])
        return torch.from_numpy(state.view(np.int64).copy()).reshape(batch).to(hashes.device)


class ByteTokenizer:
    """A tokenizer with nothing to download: a text's tokens are its UTF-8 bytes.

    Its vocabulary has 256 tokens; ``decode`` replaces bytes that are not UTF-8 (a
    sequence cut in the middle of a character) with U+FFFD.

    Examples:
        >>> from cadence.envs.custom.llm_hashing import ByteTokenizer
        >>> tokenizer = ByteTokenizer()
        >>> tokenizer.encode("né")
        [110, 195, 169]
        >>> tokenizer.decode([110, 195, 169]), tokenizer.vocab_size
        ('né', 256)
    """

    vocab_size: int = 256

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text``."""
        return list(text.encode("utf-8"))

    def decode(self, tokens: Sequence[int]) -> str:
        """The text of the bytes ``tokens`` (each in ``[0, 256)``)."""
        return bytes(int(token) for token in tokens).decode("utf-8", errors="replace")

    def __call__(self, text: str) -> list[int]:
        return self.encode(text)


def _token_list(encoded: Any, source: str) -> list[int]:
    """Token ids out of what a tokenizer returns: a list or tensor of ids, a
    ``tokenizers.Encoding`` (``.ids``) or a ``transformers`` ``BatchEncoding``
    (``["input_ids"]``)."""
    if hasattr(encoded, "ids"):
        encoded = encoded.ids
    elif isinstance(encoded, dict) or (hasattr(encoded, "keys") and "input_ids" in encoded.keys()):
        encoded = encoded["input_ids"]
    if isinstance(encoded, torch.Tensor):
        encoded = encoded.reshape(-1).tolist()
    try:
        return [int(token) for token in encoded]
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"LLMHashingEnv: {source} returned {type(encoded).__name__}, not a sequence of token ids."
        ) from err


def _check_texts(input: Any) -> None:
    """Raises naming ``input`` unless it is a str or a non-empty list of str."""
    expected = "input must be a str or a non-empty list of str"
    if isinstance(input, str):
        return
    if not isinstance(input, list):
        raise TypeError(f"LLMHashingEnv.make_tensordict: {expected}, got {type(input).__name__} {quoted(input)}.")
    if not input:
        raise ValueError(f"LLMHashingEnv.make_tensordict: {expected}, got an empty list.")
    for index, text in enumerate(input):
        if not isinstance(text, str):
            raise TypeError(
                f"LLMHashingEnv.make_tensordict: {expected}, got {type(text).__name__} {quoted(text)} "
                f"at input[{index}]."
            )


def _vocab_size_of(tokenizer: Any) -> int | None:
    getter = getattr(tokenizer, "get_vocab_size", None)  # tokenizers.Tokenizer
    if callable(getter):
        return int(getter(with_added_tokens=True))
    size = getattr(tokenizer, "vocab_size", None)  # transformers, ByteTokenizer
    return int(size) if isinstance(size, int) else None


class LLMHashingEnv(EnvBase):
    """Text generation whose observations identify token chains by a hash.

    Observations (the sequence and its hash are also the ``state_spec``: the env keeps
    nothing, ``step(td)`` depends only on ``td``):

    - ``observation_key`` (``"observation"``): the token sequence so far, ``int64`` of
      shape ``(*batch, length)`` (a ``Categorical`` spec over the vocabulary, with a
      dynamic ``-1`` length: a rollout's steps are stacked lazily).
    - ``"hash"``: ``int64`` of shape ``(*batch, 1)``, ``hashing_module`` of the sequence
      (the key the reference's documentation shows; its code writes ``"hashing"``).
    - ``text_key`` (``"text"``, with ``text_output``): the sequence decoded by the
      tokenizer (``NonTensor``).

    The action is the next token, ``int64`` of shape ``(*batch, 1)`` (other integer
    dtypes are cast; a ``bool`` action raises a ``TypeError``). The env has no
    reward and never ends (``"done"`` and ``"terminated"`` stay ``False``): a policy (a
    language model) or a step count decides when a text is finished.

    ``reset(td)`` starts from the prompt tokens at ``observation_key`` in ``td``
    (:meth:`make_tensordict` builds it from text), or from the empty sequence when
    there is none; the batch is ``td``'s (the env is not batch-locked).

    Args:
        vocab_size: the number of tokens; read from the tokenizer when not given
            (``get_vocab_size()`` or ``vocab_size``).

    Keyword Args:
        hashing_module: maps token sequences of shape ``(batch, length)`` to ``int64``
            hashes of shape ``(batch,)``. Defaults to :class:`SequenceHash`. A module with
            an ``extend(hashes, tokens)`` method is continued from the last hash at each
            step; others hash the whole sequence again.
        observation_key: where the token sequence goes.
        text_output: also write the decoded text.
        tokenizer: a ``tokenizers.Tokenizer``, a ``transformers`` tokenizer, an object
            with ``encode(text)`` and ``decode(ids)``, or a callable from text to token ids
            (``decode`` is needed for ``text_output``). Defaults to :class:`ByteTokenizer`.
        text_key: where the text goes.
        device: where the tensors live.

    Raises:
        TypeError: no ``vocab_size`` and a tokenizer that does not tell it; or
            ``text_output`` with a tokenizer that cannot ``decode``.
        ValueError: a ``vocab_size`` that the default byte tokenizer cannot decode.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.envs.custom.llm_hashing import LLMHashingEnv
        >>> env = LLMHashingEnv()
        >>> prompts = env.make_tensordict(["ab", "cd"])
        >>> prompts["observation"].shape, prompts["hash"].shape
        (torch.Size([2, 2]), torch.Size([2, 1]))
        >>> out = env.rollout(3, tensordict=prompts, auto_reset=False)
        >>> out.batch_size, out[0, -1]["next", "text"][:2], out[0, -1]["next", "observation"].shape
        (torch.Size([2, 3]), 'ab', torch.Size([5]))
    """

    batch_locked: bool = False

    def __init__(
        self,
        vocab_size: int | None = None,
        *,
        hashing_module: Callable[[torch.Tensor], torch.Tensor] | None = None,
        observation_key: NestedKey = "observation",
        text_output: bool = True,
        tokenizer: Any = None,
        text_key: NestedKey | None = "text",
        device: DeviceLike | None = None,
    ) -> None:
        default_tokenizer = tokenizer is None
        tokenizer = ByteTokenizer() if default_tokenizer else tokenizer
        if vocab_size is None:
            vocab_size = _vocab_size_of(tokenizer)
            if vocab_size is None:
                raise TypeError(
                    f"LLMHashingEnv needs vocab_size: the tokenizer ({type(tokenizer).__name__}) has neither "
                    f"get_vocab_size() nor an int vocab_size."
                )
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"LLMHashingEnv: vocab_size must be an int >= 1, got {quoted(vocab_size)}.")
        if text_output and not callable(getattr(tokenizer, "decode", None)):
            raise TypeError(
                f"LLMHashingEnv(text_output=True) decodes the tokens, but the tokenizer "
                f"({type(tokenizer).__name__}) has no decode(); pass text_output=False or a tokenizer with decode()."
            )
        if text_output and default_tokenizer and vocab_size > ByteTokenizer.vocab_size:
            raise ValueError(
                f"LLMHashingEnv: the default byte tokenizer decodes tokens below {ByteTokenizer.vocab_size}, but "
                f"vocab_size is {vocab_size}; pass a tokenizer of that vocabulary, or text_output=False."
            )
        super().__init__(device=device)
        self.vocab_size = vocab_size
        self.tokenizer = tokenizer
        self.hashing_module = hashing_module if hashing_module is not None else SequenceHash()
        self.observation_key = observation_key
        self.text_output = bool(text_output)
        self.text_key = (text_key if text_key is not None else "text") if self.text_output else None
        self._make_specs()

    def _make_specs(self) -> None:
        device = self.device
        observations: dict[NestedKey, Any] = {
            self.observation_key: Categorical(self.vocab_size, shape=(-1,), dtype=torch.int64, device=device),
            "hash": Unbounded(shape=(1,), dtype=torch.int64, device=device),
        }
        if self.text_key is not None:
            observations[self.text_key] = NonTensor(shape=(), example_data="")
        self.observation_spec = Composite(observations, device=device)
        # what step() reads back: the sequence and its hash (the text is written, never read)
        self.state_spec = Composite(
            {key: observations[key].clone() for key in (self.observation_key, "hash")}, device=device
        )
        self.action_spec = Categorical(self.vocab_size, shape=(1,), dtype=torch.int64, device=device)
        self.full_reward_spec = Composite(device=device)

    # ------------------------------------------------------------------ text
    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``, by the tokenizer.

        Examples:
            >>> from cadence.envs.custom.llm_hashing import LLMHashingEnv
            >>> LLMHashingEnv().encode("ok")
            [111, 107]
        """
        encode = getattr(self.tokenizer, "encode", None)
        if callable(encode):
            return _token_list(encode(text), f"{type(self.tokenizer).__name__}.encode")
        if callable(self.tokenizer):
            return _token_list(self.tokenizer(text), f"the tokenizer {quoted(self.tokenizer)}")
        raise TypeError(
            f"LLMHashingEnv: the tokenizer ({type(self.tokenizer).__name__}) has no encode() and is not callable."
        )

    def _decode(self, tokens: torch.Tensor, batch: torch.Size) -> Any:
        """The texts of the sequences ``tokens`` (``(*batch, length)``): a string, or a
        ``NonTensorStack`` shaped like ``batch``."""
        rows = tokens.reshape(batch.numel(), tokens.shape[-1]).tolist()
        texts = [self.tokenizer.decode(row) for row in rows]
        if not batch:
            return texts[0]
        for size in reversed(batch[1:]):  # nest the flat list as the batch
            texts = [texts[i : i + size] for i in range(0, len(texts), size)]
        return NonTensorStack.from_list(texts)

    def _hash(self, tokens: torch.Tensor) -> torch.Tensor:
        """``hashing_module`` of sequences ``(*batch, length)``, as ``(*batch, 1)``."""
        flat = tokens.reshape(tokens.shape[:-1].numel(), tokens.shape[-1])
        hashes = torch.as_tensor(self.hashing_module(flat))
        if hashes.numel() != flat.shape[0]:
            raise ValueError(
                f"LLMHashingEnv: hashing_module mapped {flat.shape[0]} sequence(s) to a tensor of shape "
                f"{tuple(hashes.shape)}; expected one hash per sequence."
            )
        return hashes.reshape(*tokens.shape[:-1], 1).to(torch.int64)

    def _observe(self, tokens: torch.Tensor, hashes: torch.Tensor, batch: torch.Size) -> TensorDict:
        out = TensorDict({self.observation_key: tokens, "hash": hashes}, batch_size=batch, device=self.device)
        if self.text_key is not None:
            out.set(self.text_key, self._decode(tokens, batch))
        return out

    def make_tensordict(self, input: str | list[str]) -> TensorDictBase:
        """Tokenizes a prompt (or a batch of prompts with as many tokens each) and resets
        the env with it.

        Args:
            input: a text, or a list of texts.

        Returns:
            The reset's output: the tokens, their hash (and text), batch size ``()`` for
            a text and ``(len(input),)`` for a list.

        Raises:
            TypeError: ``input`` is neither a str nor a list of str.
            ValueError: an empty list, or texts of different numbers of tokens (they
                would not stack; padding them would change their hashes).

        Examples:
            >>> from cadence.envs.custom.llm_hashing import LLMHashingEnv
            >>> LLMHashingEnv().make_tensordict(["to", "be"])["observation"].tolist()
            [[116, 111], [98, 101]]
            >>> LLMHashingEnv().make_tensordict(12345)
            Traceback (most recent call last):
            ...
            TypeError: LLMHashingEnv.make_tensordict: input must be a str or a non-empty list of str, got int 12345.
        """
        _check_texts(input)
        texts = input if isinstance(input, list) else [input]
        encoded = [self.encode(text) for text in texts]
        lengths = {len(tokens) for tokens in encoded}
        if len(lengths) > 1:
            raise ValueError(
                f"LLMHashingEnv.make_tensordict: the prompts have different numbers of tokens "
                f"({[len(tokens) for tokens in encoded]}); a batch needs prompts of one length."
            )
        tokens = torch.tensor(encoded, dtype=torch.int64, device=self.device).reshape(len(texts), -1)
        if not isinstance(input, list):
            tokens = tokens[0]
        batch = torch.Size([len(texts)]) if isinstance(input, list) else torch.Size([])
        return self.reset(TensorDict({self.observation_key: tokens}, batch_size=batch, device=self.device))

    # ------------------------------------------------------------------ reset and step
    def _check_step_input(self, tensordict: TensorDictBase) -> None:
        # step() casts a bool action to int64 (a one-hot's cast); a bool is no token id
        key = self.action_key
        action = tensordict.get(key, None)
        if isinstance(action, torch.Tensor) and action.dtype == torch.bool:
            raise TypeError(
                f"LLMHashingEnv: the action {key!r} must hold integer token ids (dtype {self.action_spec.dtype}), "
                f"got dtype {action.dtype}."
            )
        super()._check_step_input(tensordict)

    def _check_tokens(self, tokens: torch.Tensor, what: str) -> None:
        if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise TypeError(f"LLMHashingEnv: {what} must hold integer token ids, got dtype {tokens.dtype}.")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(
                f"LLMHashingEnv: {what} holds token ids outside [0, {self.vocab_size}) (min {int(tokens.min())}, "
                f"max {int(tokens.max())})."
            )

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        batch = tensordict.batch_size if tensordict is not None else self.batch_size
        prompt = None if tensordict is None else tensordict.get(self.observation_key, None)
        if prompt is None:
            prompt = torch.zeros((*batch, 0), dtype=torch.int64, device=self.device)
        elif prompt.ndim != len(batch) + 1:
            raise ValueError(
                f"LLMHashingEnv.reset: the prompt at {self.observation_key!r} must have shape (*batch, length) "
                f"with batch {tuple(batch)}, got {tuple(prompt.shape)}."
            )
        self._check_tokens(prompt, f"the prompt at {self.observation_key!r}")
        tokens = prompt.to(torch.int64)
        out = self._observe(tokens, self._hash(tokens), batch)
        false = torch.zeros((*batch, 1), dtype=torch.bool, device=self.device)
        out.update({"done": false, "terminated": false.clone()})
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        batch = tensordict.batch_size
        tokens = tensordict.get(self.observation_key, None)
        if tokens is None:
            raise KeyError(
                f"LLMHashingEnv is stateless: step() needs the token sequence at {self.observation_key!r} (as "
                f"reset() writes it); the input holds {sorted(map(str, tensordict.keys(True, True)))}."
            )
        action = tensordict.get("action")
        self._check_tokens(action, "the action")
        sequence = torch.cat([tokens.to(torch.int64), action.to(torch.int64)], -1)
        extend = getattr(self.hashing_module, "extend", None)
        previous = tensordict.get("hash", None)
        if callable(extend) and previous is not None:
            hashes = extend(previous.squeeze(-1), action).reshape(*batch, 1).to(torch.int64)
        else:
            hashes = self._hash(sequence)
        out = self._observe(sequence, hashes, batch)
        false = torch.zeros((*batch, 1), dtype=torch.bool, device=self.device)
        out.update({"done": false, "terminated": false.clone()})
        return out
