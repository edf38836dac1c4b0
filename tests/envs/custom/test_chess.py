"""Tests of ChessEnv, through the public API (they need python-chess)."""

from __future__ import annotations

import sys

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

chess = pytest.importorskip("chess", reason="needs the chess extra: pip install 'cadence[chess]'")

from cadence.envs import ParallelEnv, SerialEnv  # noqa: E402
from cadence.envs.custom.chess import ChessEnv  # noqa: E402
from cadence.envs.custom.chess_render import render_board  # noqa: E402
from cadence.envs.transforms import ActionMask, TransformedEnv  # noqa: E402
from cadence.envs.utils import RandomPolicy, check_env_specs, step_mdp  # noqa: E402

START_FEN = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
N_MOVES = 29274


def _action(env: ChessEnv, san: str) -> torch.Tensor:
    return torch.tensor(env.san_moves.index(san))


def _play(env: ChessEnv, moves: list[str], td: TensorDictBase | None = None) -> TensorDictBase:
    """Plays the SAN ``moves`` from ``td`` (a reset if None); returns the last step's data."""
    td = env.reset() if td is None else td
    data = None
    for san in moves:
        data = env.step(td.set("action", _action(env, san)))
        td = step_mdp(data)
    assert data is not None
    return data


def _replay(game: TensorDictBase) -> chess.Board:
    """The game's actions replayed on a python-chess board, each checked legal."""
    board = chess.Board()
    for action in game["action"].tolist():
        san = ChessEnv.san_moves[action]
        assert san in {board.san(move) for move in board.legal_moves}, (san, board.fen())
        board.push_san(san)
    return board


class TestSpecs:
    def test_default_keys(self) -> None:
        env = ChessEnv()
        assert set(env.observation_spec.keys()) == {"turn", "action_mask"}
        assert env.observation_spec["turn"].dtype == torch.bool and env.observation_spec["turn"].shape == ()
        assert env.observation_spec["action_mask"].shape == (N_MOVES,)
        assert env.action_spec.n == N_MOVES and env.action_spec.shape == () and env.action_spec.dtype == torch.int64
        assert env.reward_spec.shape == (1,) and env.reward_spec.dtype == torch.float32
        assert set(env.done_keys) == {"done", "terminated"}
        assert len(env.san_moves) == N_MOVES

    def test_all_observations(self) -> None:
        env = ChessEnv(include_san=True, include_fen=True, include_pgn=True, include_legal_moves=True, pixels=True)
        assert set(env.observation_spec.keys()) == {
            "turn", "action_mask", "san", "fen", "pgn", "legal_moves", "pixels"
        }
        assert env.observation_spec["legal_moves"].shape == (219,)
        assert env.observation_spec["pixels"].shape == (3, 256, 256)
        td = env.reset()
        assert td["san"] == "<start>" and td["fen"] == START_FEN and "[Result \"*\"]" in td["pgn"]
        assert td["pixels"].dtype == torch.uint8

    def test_no_mask(self) -> None:
        assert "action_mask" not in ChessEnv(mask_actions=False).observation_spec.keys()

    def test_state_spec(self) -> None:
        assert len(list(ChessEnv(include_fen=True).state_spec.keys())) == 0
        assert set(ChessEnv(stateful=False, include_fen=True, include_pgn=True).state_spec.keys()) == {"fen", "pgn"}

    @pytest.mark.parametrize(
        "kwargs",
        [
            {},
            {"include_san": True, "include_fen": True, "include_pgn": True, "include_legal_moves": True,
             "pixels": True},
            {"stateful": False, "include_fen": True, "include_legal_moves": True},
            {"stateful": False, "include_pgn": True, "include_san": True},
            {"mask_actions": False, "include_fen": True},
        ],
    )
    def test_check_env_specs(self, kwargs: dict) -> None:
        check_env_specs(ChessEnv(**kwargs), seed=0)

    def test_check_env_specs_with_action_mask(self) -> None:
        check_env_specs(TransformedEnv(ChessEnv(include_fen=True), ActionMask()), seed=0)

    def test_stateless_needs_fen_or_pgn(self) -> None:
        with pytest.raises(ValueError, match="include_fen=True or include_pgn=True"):
            ChessEnv(stateful=False)

    def test_missing_python_chess(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "chess", None)
        with pytest.raises(ImportError, match=r"pip install 'cadence\[chess\]'"):
            ChessEnv()


class TestRules:
    def test_a_move(self) -> None:
        env = ChessEnv(include_fen=True, include_san=True, include_legal_moves=True)
        nxt = _play(env, ["e4"])["next"]
        assert nxt["san"] == "e4"
        assert nxt["fen"] == "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
        assert nxt["turn"].item() is False
        assert nxt["reward"].item() == 0.0 and not nxt["done"].item()
        legal = sorted(env.san_moves[i] for i in nxt["action_mask"].nonzero().flatten().tolist())
        assert legal == sorted(env.get_legal_moves()) and len(legal) == 20
        indices = nxt["legal_moves"]
        assert sorted(env.san_moves[i] for i in indices[:20].tolist()) == legal
        assert (indices[20:] == N_MOVES).all()

    def test_checkmate_rewards_the_mover(self) -> None:
        env = ChessEnv(include_san=True)
        nxt = _play(env, ["f3", "e5", "g4", "Qh4#"])["next"]
        assert nxt["san"] == "Qh4#"
        assert nxt["done"].item() and nxt["terminated"].item()
        assert nxt["reward"].item() == 1.0
        assert not nxt["action_mask"].any()

    def test_stalemate_is_half_a_point(self) -> None:
        env = ChessEnv(include_fen=True)
        td = env.reset(TensorDict({"fen": "k7/8/2Q5/8/8/8/8/7K w - - 0 1"}, []), set_state=True)
        nxt = _play(env, ["Qb6"], td)["next"]
        assert nxt["done"].item() and nxt["reward"].item() == 0.5

    def test_fivefold_repetition_seen_through_the_pgn(self) -> None:
        shuffle = ["Nf3", "Nf6", "Ng1", "Ng8"] * 4
        for env in (ChessEnv(), ChessEnv(stateful=False, include_pgn=True)):
            data = _play(env, shuffle)
            assert data["next", "done"].item() and data["next", "reward"].item() == 0.5
        # a FEN carries no history: the same moves do not end the game
        assert not _play(ChessEnv(stateful=False, include_fen=True), shuffle)["next", "done"].item()


class TestIllegalMoves:
    def test_illegal_move_names_the_move_and_the_position(self) -> None:
        env = ChessEnv()
        td = env.reset()
        with pytest.raises(ValueError, match=r"illegal move 'e5' .*in the position rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP"):
            env.step(td.set("action", _action(env, "e5")))
        with pytest.raises(ValueError, match=r"illegal move 'e4\+'.*the legal moves are \['Na3'"):
            env.step(td.set("action", _action(env, "e4+")))  # the SAN must name the move exactly

    def test_move_after_the_end(self) -> None:
        env = ChessEnv()
        _play(env, ["f3", "e5", "g4", "Qh4#"])
        with pytest.raises(ValueError, match="the game is over"):
            env.step(TensorDict({"action": _action(env, "a3")}, []))

    def test_action_out_of_range(self) -> None:
        env = ChessEnv()
        with pytest.raises(ValueError, match="not a move"):
            env.step(env.reset().set("action", torch.tensor(N_MOVES)))

    def test_stateless_step_needs_the_game(self) -> None:
        env = ChessEnv(stateful=False, include_fen=True)
        with pytest.raises(KeyError, match="'fen'"):
            env.step(TensorDict({"action": _action(env, "e4")}, []))

    def test_reset_to_a_finished_game(self) -> None:
        env = ChessEnv(include_fen=True)
        mate = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"
        with pytest.raises(ValueError, match="the game is over"):
            env.reset(TensorDict({"fen": mate}, []), set_state=True)

    def test_bad_fen(self) -> None:
        env = ChessEnv(stateful=False, include_fen=True)
        with pytest.raises(ValueError, match="'fen' entry does not hold a position"):
            env.step(TensorDict({"fen": "not a fen", "action": _action(env, "e4")}, []))


class TestFullGames:
    def test_random_rollout_plays_a_legal_game_to_its_end(self) -> None:
        env = ChessEnv(include_fen=True, include_san=True)
        env.set_seed(0)
        game = env.rollout(2000)
        assert game["next", "done"][-1].item() and not game["next", "done"][:-1].any()
        board = _replay(game)
        assert board.fen() == game["next", "fen"][-1]
        assert game["next", "san"] == [env.san_moves[a] for a in game["action"].tolist()]
        assert board.is_game_over() or board.is_fifty_moves()
        assert game["next", "reward"][-1].item() == (1.0 if board.is_checkmate() else 0.5)
        assert (game["next", "reward"][:-1] == 0).all()

    def test_random_policy_on_the_masked_spec(self) -> None:
        env = TransformedEnv(ChessEnv(), ActionMask())
        policy = RandomPolicy(env.action_spec, generator=torch.Generator().manual_seed(1))
        game = env.rollout(2000, policy)
        assert game["next", "done"][-1].item() and not game["next", "done"][:-1].any()
        assert game["action_mask"].gather(-1, game["action"].unsqueeze(-1)).all()
        board = _replay(game)
        assert game["next", "reward"][-1].item() == (1.0 if board.is_checkmate() else 0.5)

    def test_stateless_pgn_game(self) -> None:
        env = ChessEnv(stateful=False, include_pgn=True)
        env.set_seed(2)
        game = env.rollout(40)
        board = _replay(game)
        assert board.move_stack == _board_of_pgn(game["next", "pgn"][-1]).move_stack


def _board_of_pgn(pgn: str) -> chess.Board:
    import io

    import chess.pgn

    return chess.pgn.read_game(io.StringIO(pgn)).end().board()


class TestStateless:
    def test_step_depends_only_on_its_input(self) -> None:
        env, other = ChessEnv(stateful=False, include_fen=True), ChessEnv(stateful=False, include_fen=True)
        td = step_mdp(_play(env, ["e4", "c5"])).set("action", _action(env, "Nf3"))
        first = env.step(td.clone())["next"]
        _play(env, ["d4", "d5"])  # the env plays another game meanwhile
        assert env.step(td.clone())["next", "fen"] == first["fen"]
        assert other.step(td.clone())["next", "fen"] == first["fen"]

    def test_a_batch_of_games(self) -> None:
        env = ChessEnv(stateful=False, include_fen=True, include_legal_moves=True)
        env.set_seed(0)
        td = env.reset(TensorDict(batch_size=[3]))
        assert td["fen"] == [START_FEN] * 3 and td["action_mask"].shape == (3, N_MOVES)
        games = env.rollout(6, tensordict=td, auto_reset=False)
        assert games.batch_size == (3, 6)
        fens = [games["next", "fen"][i][-1] for i in range(3)]
        assert len(set(fens)) == 3  # three different random games
        for i in range(3):
            assert _replay(games[i]).fen() == fens[i]

    def test_set_state_from_pgn_keeps_the_last_move(self) -> None:
        env = ChessEnv(stateful=False, include_pgn=True, include_san=True)
        pgn = _play(env, ["e4", "e5"])["next", "pgn"]
        td = env.reset(TensorDict({"pgn": pgn}, []), set_state=True)
        assert td["san"] == "e5" and td["turn"].item() is True
        assert env.reset(TensorDict({"pgn": pgn}, []))["san"] == "<start>"  # no set_state: a new game

    def test_partial_reset_keeps_the_other_games(self) -> None:
        env = ChessEnv(stateful=False, include_fen=True, include_san=True)
        td = env.reset(TensorDict(batch_size=[2]))
        td = step_mdp(env.step(td.set("action", torch.stack([_action(env, "e4"), _action(env, "d4")]))))
        td["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)
        assert out["fen"][0] == START_FEN and out["san"][0] == "<start>"
        assert out["fen"][1] == "rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - 0 1"
        assert out["san"][1] == "d4"

    def test_get_legal_moves(self) -> None:
        env = ChessEnv(stateful=False, include_fen=True)
        td = env.reset(TensorDict({"fen": "4k3/8/8/8/8/8/8/4K2R w K - 0 1"}, []), set_state=True)
        assert "O-O" in env.get_legal_moves(td) and "e1g1" in env.get_legal_moves(td, uci=True)
        with pytest.raises(ValueError, match="needs the input"):
            env.get_legal_moves()

    def test_stateful_env_plays_one_game(self) -> None:
        with pytest.raises(ValueError, match="plays one game"):
            ChessEnv().reset(TensorDict(batch_size=[2]))


class TestPixels:
    def test_pixels_draw_the_board(self) -> None:
        env = ChessEnv(pixels=True, include_fen=True)
        td = env.reset()
        assert torch.equal(td["pixels"], render_board(START_FEN))
        nxt = _play(env, ["e4"])["next"]
        assert torch.equal(nxt["pixels"], render_board(nxt["fen"]))
        assert not torch.equal(nxt["pixels"], td["pixels"])

    def test_from_pixels_is_the_same(self) -> None:
        assert "pixels" in ChessEnv(from_pixels=True).observation_spec.keys()
        with pytest.raises(ValueError, match="disagree"):
            ChessEnv(pixels=True, from_pixels=False)


class TestBatchedEnvs:
    def test_serial(self) -> None:
        env = TransformedEnv(SerialEnv(2, lambda: ChessEnv(include_fen=True)), ActionMask())
        check_env_specs(env, seed=0)
        data = env.rollout(10)
        assert data.batch_size == (2, 10)

    def test_parallel(self) -> None:
        env = TransformedEnv(ParallelEnv(2, lambda: ChessEnv(include_fen=True, include_san=True)), ActionMask())
        try:
            check_env_specs(env, seed=0)
            data = env.rollout(10)
            assert data.batch_size == (2, 10)
            for i in range(2):
                assert _replay(data[i]).fen() == data["next", "fen"][i][-1]
        finally:
            env.close()


class TestSeeding:
    def test_same_seed_same_game(self) -> None:
        env = ChessEnv()
        env.set_seed(3)
        first = env.rollout(30)["action"]
        env.set_seed(3)
        assert torch.equal(env.rollout(30)["action"], first)
        env.set_seed(4)
        assert not torch.equal(env.rollout(30)["action"], first)

    def test_global_rng_untouched(self) -> None:
        torch.manual_seed(0)
        before = torch.get_rng_state()
        ChessEnv().rollout(10)
        assert torch.equal(torch.get_rng_state(), before)
