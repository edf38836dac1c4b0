"""Tests of TicTacToeEnv, through the public API."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.envs import ParallelEnv, SerialEnv
from cadence.envs.custom.tictactoe import TicTacToeEnv
from cadence.envs.transforms import ActionMask, TransformedEnv
from cadence.envs.utils import RandomPolicy, check_env_specs, step_mdp

_LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _lines_of(board: torch.Tensor, value: int) -> bool:
    flat = board.reshape(9).tolist()
    return any(all(flat[i] == value for i in line) for line in _LINES)


def _play(env: TicTacToeEnv, squares: list[int], td: TensorDictBase | None = None) -> TensorDictBase:
    """Plays ``squares`` in turn from a reset; returns the last step's data."""
    td = env.reset() if td is None else td
    data = None
    for square in squares:
        data = env.step(td.set("action", torch.tensor(square)))
        td = step_mdp(data, reward_keys=env.reward_keys)
    assert data is not None
    return data


class TestSpecs:
    def test_keys_shapes_dtypes(self) -> None:
        env = TicTacToeEnv()
        obs = env.observation_spec
        assert obs["board"].shape == (3, 3) and obs["board"].dtype == torch.int32
        assert obs["turn"].shape == (1,) and obs["turn"].dtype == torch.int32
        assert obs["mask"].shape == (9,) and obs["mask"].dtype == torch.bool
        assert env.action_spec.shape == () and env.action_spec.dtype == torch.int64 and env.action_spec.n == 9
        assert set(env.reward_keys) == {("player0", "reward"), ("player1", "reward")}
        assert set(env.done_keys) == {"done", "terminated", "truncated"}
        assert set(env.state_spec.keys()) == {"board", "turn", "mask"}

    def test_stateful_has_no_state_spec(self) -> None:
        env = TicTacToeEnv(stateful=True, batch_size=[2])
        assert len(list(env.state_spec.keys())) == 0
        assert env.observation_spec["board"].shape == (2, 3, 3)
        assert env.action_spec.shape == (2,)

    @pytest.mark.parametrize(
        "kwargs", [{}, {"single_player": True}, {"stateful": True}, {"stateful": True, "batch_size": [3]}]
    )
    def test_check_env_specs(self, kwargs: dict) -> None:
        check_env_specs(TicTacToeEnv(**kwargs), seed=0)

    def test_check_env_specs_with_action_mask(self) -> None:
        check_env_specs(TransformedEnv(TicTacToeEnv(), ActionMask(mask_key="mask")), seed=0)


class TestRules:
    def test_reset(self) -> None:
        td = TicTacToeEnv().reset()
        assert (td["board"] == -1).all()
        assert td["turn"].tolist() == [0]
        assert td["mask"].all()
        assert not td["done"].any()

    def test_board_is_seen_by_the_player_to_move(self) -> None:
        env = TicTacToeEnv()
        nxt = _play(env, [4])["next"]
        # player1 to move: player0's mark in the centre is the opponent's (0)
        assert nxt["board"].reshape(9).tolist() == [-1, -1, -1, -1, 0, -1, -1, -1, -1]
        assert nxt["turn"].tolist() == [1]
        assert nxt["mask"].tolist() == [i != 4 for i in range(9)]
        nxt = _play(env, [4, 0])["next"]
        # player0 to move again: its own mark is 1, player1's is 0
        assert nxt["board"].reshape(9).tolist()[:5] == [0, -1, -1, -1, 1]
        assert nxt["turn"].tolist() == [0]

    def test_player0_wins_a_row(self) -> None:
        nxt = _play(TicTacToeEnv(), [0, 3, 1, 4, 2])["next"]
        assert nxt["done"].item() and nxt["terminated"].item() and not nxt["truncated"].item()
        assert nxt["player0", "reward"].item() == 1.0
        assert nxt["player1", "reward"].item() == 0.0

    def test_player1_wins_a_diagonal(self) -> None:
        nxt = _play(TicTacToeEnv(), [1, 0, 2, 4, 5, 8])["next"]
        assert nxt["done"].item()
        assert nxt["player0", "reward"].item() == 0.0
        assert nxt["player1", "reward"].item() == 1.0

    def test_draw(self) -> None:
        # X O X / X O O / O X X: no line
        data = _play(TicTacToeEnv(), [0, 1, 2, 4, 3, 5, 7, 6, 8])
        nxt = data["next"]
        assert nxt["done"].item()
        assert nxt["player0", "reward"].item() == 0.0 and nxt["player1", "reward"].item() == 0.0
        assert not nxt["mask"].any()

    def test_no_reward_before_the_end(self) -> None:
        data = _play(TicTacToeEnv(), [0, 3, 1])
        assert not data["next", "done"].item()
        assert data["next", "player0", "reward"].item() == 0.0


class TestIllegalMoves:
    def test_taken_square(self) -> None:
        env = TicTacToeEnv()
        td = step_mdp(_play(env, [4]), reward_keys=env.reward_keys)
        with pytest.raises(ValueError, match=r"illegal move 4.*taken.*\.\.\./\.O\./\.\.\.") as info:
            env.step(td.set("action", torch.tensor(4)))
        assert "legal moves are [0, 1, 2, 3, 5, 6, 7, 8]" in str(info.value)

    def test_move_after_the_end(self) -> None:
        env = TicTacToeEnv()
        td = step_mdp(_play(env, [0, 3, 1, 4, 2]), reward_keys=env.reward_keys)
        with pytest.raises(ValueError, match="game is over"):
            env.step(td.set("action", torch.tensor(8)))

    def test_off_the_board(self) -> None:
        env = TicTacToeEnv()
        with pytest.raises(ValueError, match="illegal move 9.*no such square"):
            env.step(env.reset().set("action", torch.tensor(9)))

    def test_names_the_batch_index(self) -> None:
        env = TicTacToeEnv()
        td = env.reset(TensorDict(batch_size=[3]))
        td = step_mdp(env.step(td.set("action", torch.tensor([0, 1, 2]))), reward_keys=env.reward_keys)
        with pytest.raises(ValueError, match=r"illegal move 1 at batch index \[1\]"):
            env.step(td.set("action", torch.tensor([5, 1, 6])))

    def test_stateless_step_needs_the_board(self) -> None:
        env = TicTacToeEnv()
        with pytest.raises(KeyError, match="board"):
            env.step(TensorDict({"action": torch.tensor(0), "turn": torch.zeros(1, dtype=torch.int32)}, []))

    def test_stateless_step_refuses_a_turn_that_is_no_player(self) -> None:
        env = TicTacToeEnv()
        td = env.reset().set("action", torch.tensor(0))
        with pytest.raises(ValueError, match=r"'turn' holds 5 at index \[0\]; expected 0 or 1"):
            env.step(td.set("turn", torch.tensor([5], dtype=torch.int32)))
        with pytest.raises(ValueError, match=r"'turn' must have shape \(1,\).*got \(\)"):
            env.step(td.set("turn", torch.tensor(0, dtype=torch.int32)))
        with pytest.raises(TypeError, match=r"'turn' must hold integers.*got torch.float32"):
            env.step(td.set("turn", torch.zeros(1)))

    def test_stateless_step_refuses_a_board_it_never_writes(self) -> None:
        env = TicTacToeEnv()
        td = env.reset().set("action", torch.tensor(0))
        board = torch.full((3, 3), -1, dtype=torch.int32)
        board[1, 2] = 7
        with pytest.raises(ValueError, match=r"'board' holds 7 at index \[1, 2\]; expected -1 \(empty\)"):
            env.step(td.clone().set("board", board))
        with pytest.raises(ValueError, match=r"'board' must have shape \(3, 3\).*got \(9,\)"):
            env.step(td.clone().set("board", torch.full((9,), -1)))
        with pytest.raises(TypeError, match=r"'board' must hold integers.*got torch.bool"):
            env.step(td.clone().set("board", torch.zeros(3, 3, dtype=torch.bool)))

    def test_stateless_step_takes_a_board_of_another_integer_dtype(self) -> None:
        env = TicTacToeEnv()
        td = env.reset().set("action", torch.tensor(4))
        nxt = env.step(td.set("board", torch.full((3, 3), -1)))["next"]  # int64
        assert nxt["board"].dtype == torch.int32 and nxt["board"].reshape(9)[4] == 0

    @pytest.mark.parametrize("batch_size", [-1, [2, -3], [2.5], "abc"])
    def test_batch_size_must_be_a_shape(self, batch_size: object) -> None:
        with pytest.raises(ValueError, match=rf"batch_size must be an int >= 0.*got {re.escape(repr(batch_size))}"):
            TicTacToeEnv(batch_size=batch_size)  # type: ignore[arg-type]

    def test_rand_action_without_moves(self) -> None:
        env = TicTacToeEnv()
        with pytest.raises(ValueError, match="allows no move"):
            env.rand_action(TensorDict({"mask": torch.zeros(9, dtype=torch.bool)}, []))


class TestStateless:
    def test_step_depends_only_on_its_input(self) -> None:
        env, other = TicTacToeEnv(), TicTacToeEnv()
        td = step_mdp(_play(env, [0, 4]), reward_keys=env.reward_keys).set("action", torch.tensor(8))
        first = env.step(td.clone())["next"]
        _play(env, [1, 2, 3])  # the env plays other games meanwhile
        assert (env.step(td.clone())["next"] == first).all()
        assert (other.step(td.clone())["next"] == first).all()

    def test_a_batch_of_games_from_an_unbatched_env(self) -> None:
        env = TicTacToeEnv()
        env.set_seed(0)
        td = env.reset(TensorDict(batch_size=[6]))
        assert td["board"].shape == (6, 3, 3)
        games = env.rollout(9, tensordict=td, auto_reset=False)  # up to the first game that ends
        assert games.batch_size[0] == 6 and 5 <= games.batch_size[1] <= 9
        assert games["next", "done"][:, -1].any() and not games["next", "done"][:, :-1].any()
        assert (games["next", "board"] != -1).flatten(-2).sum(-1)[:, -1].eq(games.batch_size[1]).all()

    def test_games_that_end_are_reset_in_place(self) -> None:
        env = TicTacToeEnv()
        env.set_seed(0)
        td = env.reset(TensorDict(batch_size=[4]))
        games = env.rollout(30, tensordict=td, auto_reset=False, break_when_any_done=False)
        assert games.batch_size == (4, 30)
        assert games["mask"].gather(-1, games["action"].unsqueeze(-1)).all()  # only free squares
        done = games["next", "done"].squeeze(-1)
        assert done.sum() >= 8
        after = done[:, :-1]  # a game that ended starts on an empty board, player0 to move
        assert (games["board"][:, 1:][after] == -1).all() and (games["turn"][:, 1:][after] == 0).all()

    def test_each_game_of_a_batch_has_its_own_board(self) -> None:
        env = TicTacToeEnv()
        td = env.reset(TensorDict(batch_size=[2]))
        nxt = env.step(td.set("action", torch.tensor([0, 8])))["next"]
        assert nxt["board"].reshape(2, 9)[0, 0] == 0 and nxt["board"].reshape(2, 9)[1, 8] == 0
        assert nxt["board"].reshape(2, 9)[0, 8] == -1


class TestStateful:
    def test_step_reads_only_the_action(self) -> None:
        env = TicTacToeEnv(stateful=True)
        td = env.reset()
        env.step(td.clone().set("action", torch.tensor(0)))
        # the same (stale) input: the env plays on its own board, where 0 is taken
        with pytest.raises(ValueError, match="taken"):
            env.step(td.clone().set("action", torch.tensor(0)))
        nxt = env.step(td.clone().set("action", torch.tensor(1)))["next"]
        assert nxt["board"].reshape(9).tolist()[:2] == [1, 0]

    def test_partial_reset(self) -> None:
        env = TicTacToeEnv(stateful=True, batch_size=[2])
        td = env.reset()
        td = step_mdp(env.step(td.set("action", torch.tensor([0, 0]))), reward_keys=env.reward_keys)
        td["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)
        assert (out["board"][0] == -1).all() and out["board"][1].reshape(9)[0] == 0
        nxt = env.step(out.set("action", torch.tensor([0, 1])))["next"]
        assert nxt["board"].reshape(2, 9)[0, 0] == 0  # game 0 started again: square 0 was free

    def test_reset_of_another_batch(self) -> None:
        with pytest.raises(ValueError, match="plays its"):
            TicTacToeEnv(stateful=True, batch_size=[2]).reset(TensorDict(batch_size=[3]))

    def test_partial_reset_mask_of_another_shape(self) -> None:
        env = TicTacToeEnv(stateful=True, batch_size=[2])
        td = env.reset()
        td["_reset"] = torch.tensor([[True, False], [False, True]])
        with pytest.raises(ValueError, match=r"'_reset' must hold one flag per game, shape \(2, 1\), got shape \(2, 2"):
            env.reset(td)

    def test_batch_locked(self) -> None:
        env = TicTacToeEnv(stateful=True, batch_size=[2])
        env.reset()
        with pytest.raises(ValueError, match="batch size"):
            env.step(TensorDict({"action": torch.tensor([0, 1, 2])}, [3]))


class TestSinglePlayer:
    def test_opponent_answers_within_the_step(self) -> None:
        env = TicTacToeEnv(single_player=True)
        env.set_seed(0)
        nxt = env.step(env.reset().set("action", torch.tensor(4)))["next"]
        flat = nxt["board"].reshape(9)
        assert nxt["turn"].tolist() == [0]
        assert flat[4] == 1 and (flat == 0).sum() == 1 and (flat == -1).sum() == 7

    def test_games_end_with_the_right_rewards(self) -> None:
        env = TicTacToeEnv(single_player=True)
        env.set_seed(1)
        wins = {0: 0, 1: 0, None: 0}
        for _ in range(20):
            game = env.rollout(9)
            assert game["next", "done"][-1].item() and not game["next", "done"][:-1].any()
            assert (game["turn"] == 0).all()
            last = game[-1]
            board = last["next", "board"]
            # the board is seen by the next player: the winner's marks read 0
            winner = None
            if _lines_of(board, 0):
                winner = last["turn"].item() if last["next", "turn"].item() == 1 else 1
            wins[winner] += 1
            assert last["next", "player0", "reward"].item() == float(winner == 0)
            assert last["next", "player1", "reward"].item() == float(winner == 1)
            if winner is None:
                assert not last["next", "mask"].any()
        assert wins[0] > 0 and wins[1] > 0


class TestMaskedRandomPolicy:
    @staticmethod
    def _check_game(game: TensorDictBase) -> None:
        """No move on a taken square, a done only at the end, and the right rewards."""
        assert game["next", "done"][-1].item() and not game["next", "done"][:-1].any()
        for t in range(game.batch_size[0]):
            assert game["mask"][t, game["action"][t]].item()
        last = game[-1]
        mover = last["turn"].item()
        won = _lines_of(last["next", "board"], 0)
        assert last["next", f"player{mover}", "reward"].item() == float(won)
        assert last["next", f"player{1 - mover}", "reward"].item() == 0.0
        assert won or not last["next", "mask"].any()

    def test_random_policy_on_the_masked_spec(self) -> None:
        env = TransformedEnv(TicTacToeEnv(), ActionMask(mask_key="mask"))
        policy = RandomPolicy(env.action_spec, generator=torch.Generator().manual_seed(0))
        for _ in range(10):
            self._check_game(env.rollout(20, policy))

    def test_rand_action_keeps_to_the_mask(self) -> None:
        env = TicTacToeEnv()
        env.set_seed(3)
        for _ in range(10):
            self._check_game(env.rollout(20))


class TestBatchedEnvs:
    def test_serial(self) -> None:
        env = TransformedEnv(SerialEnv(3, TicTacToeEnv), ActionMask(mask_key="mask"))
        check_env_specs(env, seed=0)
        data = env.rollout(30, break_when_any_done=False)
        assert data.batch_size == (3, 30)
        assert data["next", "done"].sum() >= 3

    def test_parallel(self) -> None:
        env = TransformedEnv(ParallelEnv(2, TicTacToeEnv), ActionMask(mask_key="mask"))
        try:
            check_env_specs(env, seed=0)
            data = env.rollout(20, break_when_any_done=False)
            assert data.batch_size == (2, 20)
            assert data["next", "done"].any()
        finally:
            env.close()

    def test_rollout_steps_keep_the_same_keys(self) -> None:
        # the per-player rewards leave no empty "player0" level at the root of the next step
        data = TicTacToeEnv().rollout(4)
        assert "player0" not in data.keys() and ("next", "player0", "reward") in data.keys(True, True)


class TestSeeding:
    def test_same_seed_same_games(self) -> None:
        env = TicTacToeEnv(single_player=True)
        env.set_seed(5)
        first = [env.rollout(9)["action"].tolist() for _ in range(3)]
        env.set_seed(5)
        assert [env.rollout(9)["action"].tolist() for _ in range(3)] == first

    def test_different_seeds_differ(self) -> None:
        env = TicTacToeEnv()
        env.set_seed(1)
        first = [env.rollout(9)["action"].tolist() for _ in range(3)]
        env.set_seed(2)
        assert [env.rollout(9)["action"].tolist() for _ in range(3)] != first

    def test_global_rng_untouched(self) -> None:
        torch.manual_seed(0)
        before = torch.get_rng_state()
        TicTacToeEnv(single_player=True).rollout(9)
        assert torch.equal(torch.get_rng_state(), before)
