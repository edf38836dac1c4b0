"""Built-in environments written natively against the Cadence API."""

from cadence.envs.custom.chess import ChessEnv
from cadence.envs.custom.llm_hashing import LLMHashingEnv
from cadence.envs.custom.pendulum import PendulumEnv
from cadence.envs.custom.tictactoe import TicTacToeEnv

__all__ = ["ChessEnv", "LLMHashingEnv", "PendulumEnv", "TicTacToeEnv"]
