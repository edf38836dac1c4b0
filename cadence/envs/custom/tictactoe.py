"""Tic-tac-toe for two players (or one, against a random opponent), written in torch.

The board is seen from the side of the player to move: ``1`` marks that player's
crosses, ``0`` the opponent's, ``-1`` an empty square. After every move the board is
turned around for the other player, ``"turn"`` flips, and ``"mask"`` marks the empty
squares, the moves the next player may make. A player who completes a row, a column or
a diagonal gets a reward of ``1`` (under ``(player_name, "reward")``) and the game ends;
a full board without a line ends it in a draw, with no reward.

The env is stateless by default (the board travels in the tensordict, so one env plays
any batch of games); ``stateful=True`` keeps the boards in the env instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase

from cadence._utils import quoted
from cadence.data import Bounded, Categorical, Composite, Unbounded
from cadence.envs.common import EnvBase

__all__ = ["TicTacToeEnv"]

EMPTY: int = -1
#: The eight lines of three squares (flat indices, row-major) that win the game.
LINES: torch.Tensor = torch.tensor(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)
PLAYER_KEYS: tuple[str, str] = ("player0", "player1")

DeviceLike = torch.device | str | int
BatchSizeLike = Sequence[int] | torch.Size | int


def _as_size(batch_size: BatchSizeLike | None) -> torch.Size:
    """``batch_size`` as a ``torch.Size``, or a ``ValueError`` naming it (dims are ints >= 0)."""
    if batch_size is None:
        return torch.Size([])
    dims = [batch_size] if isinstance(batch_size, int) else batch_size
    try:
        dims = list(dims)
    except TypeError:
        dims = None
    if dims is None or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims):
        raise ValueError(
            f"TicTacToeEnv: batch_size must be an int >= 0 or a sequence of them (the number of games), "
            f"got {quoted(batch_size)}."
        )
    return torch.Size(dims)


def completed_line(board: torch.Tensor) -> torch.Tensor:
    """Whether a board (as the env writes it) holds a line of three of either player.

    Args:
        board: boards of shape ``(*batch, 3, 3)``: ``1``, ``0`` or ``-1`` (empty).

    Returns:
        A boolean tensor of shape ``batch``.

    Examples:
        >>> import torch
        >>> from cadence.envs.custom.tictactoe import completed_line
        >>> board = torch.full((3, 3), -1)
        >>> bool(completed_line(board))
        False
        >>> board[:, 1] = 0  # the opponent holds the middle column
        >>> bool(completed_line(board))
        True
    """
    cells = board.flatten(-2, -1)[..., LINES.to(board.device)]  # (*batch, 8, 3)
    same = (cells == cells[..., :1]).all(-1) & (cells[..., 0] != EMPTY)
    return same.any(-1)


def _position_text(board: torch.Tensor) -> str:
    """One board, as rows of ``X`` (the player to move), ``O`` (the opponent) and ``.``."""
    symbols = {1: "X", 0: "O", EMPTY: "."}
    rows = ["".join(symbols[int(v)] for v in row) for row in board.reshape(3, 3)]
    return "/".join(rows)


class TicTacToeEnv(EnvBase):
    """Tic-tac-toe: two players (or one against a random opponent) on a 3 x 3 board.

    Observations (and, stateless, the state read back by ``step``):

    - ``"board"``: ``int32`` of shape ``(*batch, 3, 3)``, from the side of the player to
      move: ``1`` their marks, ``0`` the opponent's, ``-1`` empty.
    - ``"turn"``: ``int32`` of shape ``(*batch, 1)``, the player to move (``0`` first).
    - ``"mask"``: ``bool`` of shape ``(*batch, 9)``, the empty squares (the legal moves).

    The action is the square to mark, an ``int64`` in ``[0, 9)`` of shape ``batch``
    (row-major: ``3 * row + column``). Rewards are ``("player0", "reward")`` and
    ``("player1", "reward")`` (``float32``, shape ``(*batch, 1)``): ``1`` for the player
    whose move completes a line, ``0`` otherwise (a loss or a draw costs nothing). The
    done flags are ``"done"``, ``"terminated"`` (set together when a line is completed or
    the board is full) and ``"truncated"`` (never set).

    A move on a taken square, or a move after the game ended, raises a ``ValueError``
    naming the move and the position. ``rand_action`` draws among the squares that the
    input's ``"mask"`` allows (a random policy then plays legal games), with the env's
    generator :attr:`rng`. A policy drawing from the action spec needs the mask there:
    wrap the env as ``TransformedEnv(env, ActionMask(mask_key="mask"))``.

    **Stateless** (the default): the env keeps no game. ``step(td)`` reads ``"board"``
    and ``"turn"`` from ``td`` (they are its ``state_spec``), so it depends only on
    ``td``, and one env plays any batch of games:
    ``env.reset(TensorDict(batch_size=[n]))`` starts ``n`` of them. The state it reads
    back must be one the env writes: a ``"board"`` of shape ``(*batch, 3, 3)`` holding
    ``-1``, ``0`` or ``1``, and a ``"turn"`` of shape ``(*batch, 1)`` holding ``0`` or
    ``1`` (integers of any dtype); anything else raises, naming the key and the value.
    **Stateful** (``stateful=True``): the env keeps the boards of its ``batch_size``;
    ``step`` reads only the action (it is batch-locked and has no state spec).

    Next to the reference: its docstring prints an action of shape ``(1,)`` and a
    two-valued ``Categorical`` board; its env takes actions of shape ``()`` (as does this
    one, which lets ``ActionMask`` mask a batch of them) and writes ``-1`` for empty
    squares, which a ``Bounded(-1, 1)`` spec describes here. It lets a move overwrite a
    taken square; this env raises.

    Args:
        single_player: ``player1`` is a random opponent that answers every move of
            ``player0`` within the same step (drawn with :attr:`rng`); the policy then
            always plays ``player0`` and ``"turn"`` is ``0`` until the game ends.
        stateful: keep the games in the env rather than in the data.
        device: where the data lives.
        batch_size: the number of games the env plays by default (a shape).

    Raises:
        ValueError: a ``batch_size`` that is not a shape (ints >= 0).

    Examples:
        >>> import torch
        >>> from cadence.envs.custom.tictactoe import TicTacToeEnv
        >>> env = TicTacToeEnv()
        >>> td = env.reset()
        >>> td["board"].tolist(), td["turn"].tolist()
        ([[-1, -1, -1], [-1, -1, -1], [-1, -1, -1]], [0])
        >>> for square in (0, 3, 1, 4, 2):  # player0 fills the top row
        ...     td = env.step(td.set("action", torch.tensor(square)))["next"]
        >>> td["done"].item(), td["player0", "reward"].item(), td["player1", "reward"].item()
        (True, 1.0, 0.0)

        A random game (``rand_action`` keeps to the mask) ends at a done:

        >>> env.set_seed(0) is not None
        True
        >>> game = env.rollout(20)
        >>> bool(game["next", "done"][-1]), bool(game["next", "done"][:-1].any())
        (True, False)

        A stateless step refuses a state the env never writes:

        >>> td = env.reset().set("action", torch.tensor(0))
        >>> env.step(td.set("turn", torch.tensor([5], dtype=torch.int32)))
        Traceback (most recent call last):
        ...
        ValueError: TicTacToeEnv: the input's 'turn' holds 5 at index [0]; expected 0 or 1 (the player to move).
    """

    #: ``False`` for a stateless env, whose inputs may carry any batch of games (their own boards).
    batch_locked: bool = False

    def __init__(
        self,
        *,
        single_player: bool = False,
        stateful: bool = False,
        device: DeviceLike | None = None,
        batch_size: BatchSizeLike | None = None,
    ) -> None:
        super().__init__(device=device, batch_size=_as_size(batch_size))
        self.single_player = bool(single_player)
        self.stateful = bool(stateful)
        # a stateful env plays its own games: its inputs must have its batch size
        self.batch_locked = self.stateful
        self._make_specs()
        self._board: torch.Tensor | None = None
        self._turn: torch.Tensor | None = None

    def _make_specs(self) -> None:
        shape, device = self.batch_size, self.device
        self.observation_spec = Composite(
            board=Bounded(EMPTY, 1, shape=(*shape, 3, 3), dtype=torch.int32, device=device),
            turn=Categorical(2, shape=(*shape, 1), dtype=torch.int32, device=device),
            mask=Categorical(2, shape=(*shape, 9), dtype=torch.bool, device=device),
            shape=shape,
            device=device,
        )
        if not self.stateful:
            self.state_spec = self.observation_spec.clone()
        self.action_spec = Categorical(9, shape=shape, dtype=torch.int64, device=device)
        self.full_reward_spec = Composite(
            {
                player: Composite(
                    reward=Unbounded(shape=(*shape, 1), dtype=torch.float32, device=device),
                    shape=shape,
                    device=device,
                )
                for player in PLAYER_KEYS
            },
            shape=shape,
            device=device,
        )
        flag = Categorical(2, shape=(*shape, 1), dtype=torch.bool, device=device)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=shape, device=device
        )

    # ------------------------------------------------------------------ reset
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        batch = tensordict.batch_size if tensordict is not None else self.batch_size
        device = self.device
        board = torch.full((*batch, 3, 3), EMPTY, dtype=torch.int32, device=device)
        turn = torch.zeros((*batch, 1), dtype=torch.int32, device=device)
        if self.stateful:
            board, turn = self._reset_stored(board, turn, tensordict)
        false = torch.zeros((*batch, 1), dtype=torch.bool, device=device)
        return TensorDict(
            {
                "board": board,
                "turn": turn,
                "mask": (board == EMPTY).flatten(-2, -1),
                "done": false,
                "terminated": false.clone(),
                "truncated": false.clone(),
            },
            batch_size=batch,
            device=device,
        )

    def _reset_stored(
        self, board: torch.Tensor, turn: torch.Tensor, tensordict: TensorDictBase | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Stateful: resets the stored games that ``"_reset"`` selects (all without one)."""
        if board.shape[:-2] != self.batch_size:
            raise ValueError(
                f"TicTacToeEnv(stateful=True) plays its {tuple(self.batch_size)} games: reset() got an input of "
                f"batch size {tuple(board.shape[:-2])}; use the stateless env for other batches."
            )
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is not None and self._board is not None:
            if mask.numel() != self.batch_size.numel():
                raise ValueError(
                    f"TicTacToeEnv(stateful=True).reset: '_reset' must hold one flag per game, shape "
                    f"{(*self.batch_size, 1)}, got shape {tuple(mask.shape)}."
                )
            rows = mask.reshape(self.batch_size)
            board = torch.where(rows[..., None, None], board, self._board)
            turn = torch.where(rows[..., None], turn, self._turn)
        self._board, self._turn = board.clone(), turn.clone()
        return board, turn

    # ------------------------------------------------------------------ step
    def _read_state(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        if self.stateful:
            if self._board is None or self._turn is None:
                raise RuntimeError("TicTacToeEnv(stateful=True) was stepped before a reset.")
            return self._board, self._turn
        board = tensordict.get("board", None)
        turn = tensordict.get("turn", None)
        if board is None or turn is None:
            missing = [key for key, value in (("board", board), ("turn", turn)) if value is None]
            raise KeyError(
                f"TicTacToeEnv is stateless: step() needs {missing} in its input (as reset() writes them); "
                f"the input holds {sorted(map(str, tensordict.keys(True, True)))}."
            )
        self._check_state(board, turn, tensordict.batch_size)
        # the stateless step writes the spec's dtype, whatever integers it was given
        return board.to(torch.int32), turn.to(torch.int32)

    @staticmethod
    def _check_state(board: torch.Tensor, turn: torch.Tensor, batch: torch.Size) -> None:
        """Raises naming ``"board"`` or ``"turn"`` if the state read back by a stateless
        step is not one the env writes: shapes ``(*batch, 3, 3)`` and ``(*batch, 1)``,
        integers, squares in ``{-1, 0, 1}`` and turns in ``{0, 1}``."""
        for key, value, shape, allowed in (
            ("board", board, (*batch, 3, 3), "-1 (empty), 0 (the opponent's) or 1 (the player to move's)"),
            ("turn", turn, (*batch, 1), "0 or 1 (the player to move)"),
        ):
            if tuple(value.shape) != shape:
                raise ValueError(
                    f"TicTacToeEnv: the input's {key!r} must have shape {shape} (the input's batch size "
                    f"{tuple(batch)}, then {shape[len(batch):]}), got {tuple(value.shape)}."
                )
            if value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
                raise TypeError(f"TicTacToeEnv: the input's {key!r} must hold integers ({allowed}), got {value.dtype}.")
            low = EMPTY if key == "board" else 0
            bad = (value < low) | (value > 1)
            if bool(bad.any()):
                index = [int(i) for i in bad.nonzero()[0]]
                raise ValueError(
                    f"TicTacToeEnv: the input's {key!r} holds {int(value[tuple(index)])} at index {index}; "
                    f"expected {allowed}."
                )

    def _check_moves(self, board: torch.Tensor, turn: torch.Tensor, action: torch.Tensor) -> None:
        """Raises a ``ValueError`` naming the first illegal move: off the board, on a taken
        square, or in a game that is over."""
        flat = board.flatten(-2, -1)
        off_board = (action < 0) | (action > 8)
        taken = flat.gather(-1, action.clamp(0, 8).unsqueeze(-1)).squeeze(-1) != EMPTY
        over = completed_line(board)
        bad = off_board | taken | over
        if not bool(bad.any()):
            return
        index = tuple(int(i) for i in bad.nonzero()[0])
        move = int(action[index])
        if bool(off_board[index]):
            why = "there is no such square (the squares are 0 to 8)"
        elif bool(over[index]):
            why = "the game is over (a line is complete): reset it first"
        else:
            why = f"the square (row {move // 3}, column {move % 3}) is taken"
        where = f" at batch index {list(index)}" if index else ""
        raise ValueError(
            f"TicTacToeEnv: illegal move {move}{where} by player {int(turn[index].reshape(-1)[0])}: {why}. "
            f"The position (rows top to bottom; X the player to move, O the opponent, . empty): "
            f"{_position_text(board[index])}; the legal moves are "
            f"{(flat[index] == EMPTY).nonzero().flatten().tolist() if not bool(over[index]) else []}."
        )

    @staticmethod
    def _play(
        board: torch.Tensor, turn: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Marks ``action`` for the player to move (legal moves only). Returns the board
        turned to the next player, the next turn, the next mask, whether the mover won,
        and whether the game ended; flags of shape ``(*batch, 1)``."""
        flat = board.flatten(-2, -1).clone()
        flat.scatter_(-1, action.unsqueeze(-1), 1)
        won = (flat[..., LINES.to(flat.device)] == 1).all(-1).any(-1, keepdim=True)
        mask = flat == EMPTY
        done = won | ~mask.any(-1, keepdim=True)
        flipped = torch.where(flat == EMPTY, flat, 1 - flat).reshape(board.shape)
        return flipped, 1 - turn, mask, won, done

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        board, turn = self._read_state(tensordict)
        action = tensordict.get("action").long()
        self._check_moves(board, turn, action)
        board, next_turn, mask, won, done = self._play(board, turn, action)
        reward0 = won & (turn == 0)
        reward1 = won & (turn == 1)
        if self.single_player:
            # player1 answers where player0 moved and the game goes on
            answer = ~done & (turn == 0)
            if bool(answer.any()):
                reply = self._draw(mask.clone().masked_fill_(~answer, True))
                board2, turn2, mask2, won2, done2 = self._play(board, next_turn, reply)
                board = torch.where(answer.unsqueeze(-1), board2, board)
                next_turn = torch.where(answer, turn2, next_turn)
                mask = torch.where(answer, mask2, mask)
                done = torch.where(answer, done2, done)
                reward1 = reward1 | (answer & won2)
        if self.stateful:
            self._board, self._turn = board.clone(), next_turn.clone()
        return TensorDict(
            {
                "board": board,
                "turn": next_turn,
                "mask": mask,
                "player0": {"reward": reward0.to(torch.float32)},
                "player1": {"reward": reward1.to(torch.float32)},
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros_like(done),
            },
            batch_size=tensordict.batch_size,
            device=self.device,
        )

    # ------------------------------------------------------------------ random moves
    def _draw(self, mask: torch.Tensor) -> torch.Tensor:
        """One allowed square per row of ``mask`` (``(*batch, 9)``), drawn with :attr:`rng`."""
        allowed = mask.any(-1)
        if not bool(allowed.all()):
            index = [int(i) for i in (~allowed).nonzero()[0]]
            raise ValueError(
                f"TicTacToeEnv.rand_action: the mask allows no move at batch index {index} (the board is full); "
                f"reset that game first."
            )
        weights = mask.reshape(-1, 9).to(torch.float32)
        rng_device = self.rng.device
        drawn = torch.multinomial(weights.to(rng_device), 1, generator=self.rng).to(mask.device)
        return drawn.reshape(mask.shape[:-1])

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes a random legal move into ``tensordict``: one of the squares that its
        ``"mask"`` allows (all of them without a mask; a stateful env's own mask),
        drawn with :attr:`rng`.

        Args:
            tensordict: the input of the next step (its batch is the env's, or any batch
                for a stateless env); a fresh one of the env's batch size if ``None``.

        Returns:
            ``tensordict``, with ``"action"`` set.

        Raises:
            ValueError: a game whose mask allows no move (it is over).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from cadence.envs.custom.tictactoe import TicTacToeEnv
            >>> env = TicTacToeEnv()
            >>> td = TensorDict({"mask": torch.arange(9) == 4}, [])
            >>> env.rand_action(td)["action"].item()
            4
        """
        if tensordict is None:
            tensordict = TensorDict({}, batch_size=self.batch_size, device=self.device)
        mask = tensordict.get("mask", None)
        if mask is None and self.stateful and self._board is not None:
            mask = (self._board == EMPTY).flatten(-2, -1)
        if mask is None:
            mask = torch.ones((*tensordict.batch_size, 9), dtype=torch.bool, device=self.device)
        return tensordict.set("action", self._draw(mask.to(torch.bool)))
