"""Tests of LLMHashingEnv, through the public API."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.envs import ParallelEnv, SerialEnv
from cadence.envs.custom.llm_hashing import ByteTokenizer, LLMHashingEnv, SequenceHash
from cadence.envs.utils import check_env_specs, step_mdp


def _generate(env: LLMHashingEnv, td: TensorDict, tokens: list[int]) -> TensorDict:
    """Appends ``tokens`` one step at a time; returns the last step's ``"next"`` data."""
    for token in tokens:
        action = torch.full((*td.batch_size, 1), token, dtype=torch.int64)
        td = step_mdp(env.step(td.set("action", action)), reward_keys=env.reward_keys)
    return td


class _WordTokenizer:
    """A transformers-like tokenizer: ``encode`` gives a list, ``__call__`` a dict."""

    vocab_size = 4
    words = ["<unk>", "hello", "world", "again"]

    def encode(self, text: str) -> list[int]:
        return [self.words.index(w) if w in self.words else 0 for w in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids)

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text)}


class TestDefaultTokenizer:
    def test_prompt(self) -> None:
        env = LLMHashingEnv()
        td = env.make_tensordict("Hi")
        assert env.vocab_size == 256 and isinstance(env.tokenizer, ByteTokenizer)
        assert td["observation"].tolist() == [72, 105]
        assert td["text"] == "Hi"
        assert td["hash"].shape == (1,) and td["hash"].dtype == torch.int64
        assert not td["done"].any()

    def test_steps_append_tokens(self) -> None:
        env = LLMHashingEnv()
        td = _generate(env, env.make_tensordict("Hi"), [32, 121, 111])
        assert td["observation"].tolist() == [72, 105, 32, 121, 111]
        assert td["text"] == "Hi yo"

    def test_hash_names_the_sequence(self) -> None:
        env = LLMHashingEnv()
        stepped = _generate(env, env.make_tensordict("ab"), [ord("c"), ord("d")])
        assert torch.equal(stepped["hash"], env.make_tensordict("abcd")["hash"])
        assert torch.equal(stepped["hash"], _generate(env, env.reset(), [ord(c) for c in "abcd"])["hash"])
        assert not torch.equal(stepped["hash"], env.make_tensordict("abdc")["hash"])
        assert torch.equal(LLMHashingEnv().make_tensordict("abcd")["hash"], stepped["hash"])  # another env

    def test_distinct_sequences_distinct_hashes(self) -> None:
        hasher = SequenceHash()
        tokens = torch.cartesian_prod(torch.arange(40), torch.arange(40), torch.arange(3))
        hashes = hasher(tokens)
        assert hashes.unique().numel() == tokens.shape[0]
        assert hasher(torch.zeros(0, dtype=torch.int64)).shape == ()

    def test_batch_of_prompts(self) -> None:
        env = LLMHashingEnv()
        td = env.make_tensordict(["ab", "cd", "ab"])
        assert td.batch_size == (3,) and td["observation"].shape == (3, 2)
        assert td["text"] == ["ab", "cd", "ab"]
        assert td["hash"][0] == td["hash"][2] and td["hash"][0] != td["hash"][1]
        with pytest.raises(ValueError, match=r"different numbers of tokens \(\[1, 2\]\)"):
            env.make_tensordict(["a", "bc"])

    def test_two_dim_batch(self) -> None:
        env = LLMHashingEnv()
        prompt = torch.tensor([[[97], [98]], [[99], [100]]])
        td = env.reset(TensorDict({"observation": prompt}, [2, 2]))
        assert td["text"] == [["a", "b"], ["c", "d"]]
        nxt = _generate(env, td, [33])
        assert nxt[1, 0]["text"] == "c!" and nxt["hash"].shape == (2, 2, 1)

    def test_reset_without_prompt_starts_empty(self) -> None:
        td = LLMHashingEnv().reset()
        assert td["observation"].shape == (0,) and td["text"] == ""


class TestSpecsAndLoop:
    def test_specs(self) -> None:
        env = LLMHashingEnv()
        assert set(env.observation_spec.keys()) == {"observation", "hash", "text"}
        assert env.observation_spec["observation"].shape == (-1,)
        assert env.action_spec.shape == (1,) and env.action_spec.n == 256
        assert env.reward_keys == []
        assert set(env.state_spec.keys()) == {"observation", "hash"}

    def test_check_env_specs(self) -> None:
        env = LLMHashingEnv()
        check_env_specs(env, seed=0)
        check_env_specs(env, seed=0, tensordict=env.make_tensordict("prompt"))
        check_env_specs(LLMHashingEnv(text_output=False), seed=0)

    def test_rollout_never_ends(self) -> None:
        env = LLMHashingEnv()
        data = env.rollout(12, tensordict=env.make_tensordict(["x", "y"]), auto_reset=False)
        assert data.batch_size == (2, 12)
        assert not data["next", "done"].any()
        assert data[1, -1]["next", "observation"].shape == (13,)

    def test_stateless(self) -> None:
        env, other = LLMHashingEnv(), LLMHashingEnv()
        td = env.make_tensordict("stateless").set("action", torch.tensor([33]))
        first = env.step(td.clone())["next"]
        env.rollout(5)  # the env generates other texts meanwhile
        assert torch.equal(env.step(td.clone())["next", "hash"], first["hash"])
        assert torch.equal(other.step(td.clone())["next", "hash"], first["hash"])
        assert other.step(td.clone())["next", "text"] == "stateless!"

    def test_seeding(self) -> None:
        env = LLMHashingEnv()
        env.set_seed(0)
        first = env.rollout(6)["action"]
        env.set_seed(0)
        assert torch.equal(env.rollout(6)["action"], first)

    def test_custom_keys(self) -> None:
        env = LLMHashingEnv(observation_key="tokens", text_key="completion")
        td = _generate(env, env.make_tensordict("a"), [98])
        assert td["tokens"].tolist() == [97, 98] and td["completion"] == "ab"
        assert "text" not in LLMHashingEnv(text_output=False).make_tensordict("a").keys()

    def test_serial_and_parallel(self) -> None:
        check_env_specs(SerialEnv(2, LLMHashingEnv), seed=0)
        env = ParallelEnv(2, LLMHashingEnv)
        try:
            check_env_specs(env, seed=0)
            data = env.rollout(4)
            assert data.batch_size == (2, 4)
            assert data[0, -1]["next", "observation"].shape == (4,)
        finally:
            env.close()


class TestTokenizers:
    def test_tokenizers_library(self) -> None:
        tokenizers = pytest.importorskip("tokenizers", reason="needs the tokenizers library")
        vocab = {"[UNK]": 0, "hello": 1, "world": 2, "torch": 3, "rl": 4}
        tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
        env = LLMHashingEnv(tokenizer=tokenizer)
        assert env.vocab_size == 5
        td = env.make_tensordict("hello world")
        assert td["observation"].tolist() == [1, 2] and td["text"] == "hello world"
        assert _generate(env, td, [3, 4])["text"] == "hello world torch rl"
        check_env_specs(env, seed=0, tensordict=td)

    def test_object_with_encode_and_decode(self) -> None:
        env = LLMHashingEnv(tokenizer=_WordTokenizer())
        td = _generate(env, env.make_tensordict("hello world"), [3])
        assert td["text"] == "hello world again" and td["observation"].tolist() == [1, 2, 3]

    def test_callable_tokenizer(self) -> None:
        def tokenize(text: str) -> torch.Tensor:
            return torch.tensor([len(word) for word in text.split()])

        with pytest.raises(TypeError, match="no decode"):
            LLMHashingEnv(10, tokenizer=tokenize)
        env = LLMHashingEnv(10, tokenizer=tokenize, text_output=False)
        assert env.make_tensordict("a bb ccc")["observation"].tolist() == [1, 2, 3]

    def test_vocab_size_needed(self) -> None:
        with pytest.raises(TypeError, match="needs vocab_size"):
            LLMHashingEnv(tokenizer=lambda text: [0], text_output=False)
        with pytest.raises(ValueError, match="default byte tokenizer"):
            LLMHashingEnv(1000)
        assert LLMHashingEnv(1000, text_output=False).action_spec.n == 1000


class TestHashingModule:
    def test_module_without_extend_hashes_the_whole_sequence(self) -> None:
        calls = []

        def weighted_sum(tokens: torch.Tensor) -> torch.Tensor:
            calls.append(tokens.shape)
            return (tokens * torch.arange(1, tokens.shape[-1] + 1)).sum(-1)

        env = LLMHashingEnv(hashing_module=weighted_sum)
        td = _generate(env, env.make_tensordict("ab"), [99])
        assert td["hash"].item() == 97 * 1 + 98 * 2 + 99 * 3
        assert calls[-1] == (1, 3)

    def test_module_with_a_wrong_shape(self) -> None:
        env = LLMHashingEnv(hashing_module=lambda tokens: tokens)
        with pytest.raises(ValueError, match="one hash per sequence"):
            env.make_tensordict("ab")


class TestBadInput:
    def test_token_out_of_vocabulary(self) -> None:
        env = LLMHashingEnv()
        with pytest.raises(ValueError, match=r"the action holds token ids outside \[0, 256\)"):
            env.step(env.make_tensordict("a").set("action", torch.tensor([256])))

    def test_step_needs_the_sequence(self) -> None:
        env = LLMHashingEnv()
        with pytest.raises(KeyError, match="'observation'"):
            env.step(TensorDict({"action": torch.tensor([1])}, []))

    def test_prompt_of_the_wrong_rank(self) -> None:
        env = LLMHashingEnv()
        with pytest.raises(ValueError, match=r"shape \(\*batch, length\)"):
            env.reset(TensorDict({"observation": torch.zeros(2, 3, dtype=torch.int64)}, []))

    def test_bool_action(self) -> None:
        env = LLMHashingEnv()
        with pytest.raises(TypeError, match=r"action 'action' must hold integer token ids .*got dtype torch.bool"):
            env.step(env.make_tensordict("a").set("action", torch.tensor([True])))

    @pytest.mark.parametrize(
        ("value", "error", "came"),
        [
            (12345, TypeError, "got int 12345"),
            ([], ValueError, "got an empty list"),
            (("a", "b"), TypeError, r"got tuple \('a', 'b'\)"),
            (["a", 3], TypeError, r"got int 3 at input\[1\]"),
        ],
    )
    def test_make_tensordict_refuses_what_is_no_text(self, value: object, error: type, came: str) -> None:
        with pytest.raises(error, match=rf"input must be a str or a non-empty list of str, {came}"):
            LLMHashingEnv().make_tensordict(value)  # type: ignore[arg-type]

    def test_make_tensordict_quotes_a_huge_input_briefly(self) -> None:
        with pytest.raises(TypeError, match="input must be a str") as info:
            LLMHashingEnv().make_tensordict([b"x" * 10_000])  # type: ignore[list-item]
        assert len(str(info.value)) < 400 and "10000 characters" in str(info.value)

    def test_vocab_size_must_be_a_positive_int(self) -> None:
        with pytest.raises(ValueError, match="vocab_size must be an int >= 1, got True"):
            LLMHashingEnv(True, text_output=False)
