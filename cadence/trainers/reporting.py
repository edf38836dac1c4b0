"""What a training run writes for people to read: CSV files, TensorBoard events, a
progress bar and a plot of the returns.

A run folder holds two CSV files: ``episodes.csv`` (one row per finished training
episode: the frame count at its end, its return and length) and ``metrics.csv`` (one
row per evaluation: frames, updates, wall-clock seconds, frames per second, the
training return of the episodes finished since the previous row, the evaluation
return, the mean losses). TensorBoard gets the same numbers under ``tensorboard/``.
On resume, :meth:`MetricsLog.truncate` cuts the CSV files back to what the checkpoint
had seen, and TensorBoard purges the events after the checkpoint's frame count, so that
a resumed run's logs read as an unbroken run's.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> log = MetricsLog(folder, tensorboard=False)
    >>> log.episode(frames=200, episode_return=-1200.5, length=200)
    >>> log.row({"frames": 1000, "eval_return": -900.0})
    >>> log.close()
    >>> (folder / "metrics.csv").read_text().splitlines()[1].split(",")[:2]
    ['1000', '']
"""

from __future__ import annotations

import csv
import io
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

__all__ = ["EPISODE_COLUMNS", "METRIC_COLUMNS", "MetricsLog", "ProgressDisplay", "plot_returns", "read_csv"]

#: The columns of ``episodes.csv``.
EPISODE_COLUMNS = ("frames", "return", "length")
#: The columns of ``metrics.csv``.
METRIC_COLUMNS = (
    "frames", "updates", "wall_s", "fps", "train_return", "train_episodes", "eval_return", "eval_return_std",
    "loss_actor", "loss_value", "loss_alpha", "alpha",
)
# columns that differ between runs of the same config (clocks); everything else repeats exactly
TIMING_COLUMNS = ("wall_s", "fps")


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class MetricsLog:
    """The run's CSV files and, optionally, its TensorBoard events.

    Args:
        folder: the run folder.
        tensorboard: also write TensorBoard events under ``folder / "tensorboard"``.
        purge_after: on resume, the frame count of the checkpoint: TensorBoard drops the
            events logged after it by the interrupted run.
        start_over: empty the logs an earlier attempt left (a run stopped before its
            first checkpoint starts again from frame 0).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> log = MetricsLog(Path(tempfile.mkdtemp()), tensorboard=False)
        >>> log.sizes()
        {'episodes.csv': 21, 'metrics.csv': 121}
        >>> log.close()
    """

    def __init__(
        self, folder: Path, tensorboard: bool = True, purge_after: int | None = None, start_over: bool = False
    ) -> None:
        self.folder = folder
        self._files: dict[str, tuple[TextIO, tuple[str, ...]]] = {}
        for name, columns in (("episodes.csv", EPISODE_COLUMNS), ("metrics.csv", METRIC_COLUMNS)):
            path = folder / name
            fresh = start_over or not path.exists() or path.stat().st_size == 0
            handle = open(path, "w" if start_over else "a", newline="")
            if fresh:
                handle.write(",".join(columns) + "\n")
                handle.flush()
            self._files[name] = (handle, columns)
        self._writer = None
        if start_over:
            for events in (folder / "tensorboard").glob("events.out.tfevents.*"):
                events.unlink()
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step drops the events at and after it: those an interrupted run logged past its checkpoint
            purge = None if purge_after is None else purge_after + 1
            self._writer = SummaryWriter(log_dir=str(folder / "tensorboard"), purge_step=purge)

    def _write(self, name: str, values: Mapping[str, Any]) -> None:
        handle, columns = self._files[name]
        unknown = set(values) - set(columns)
        if unknown:
            raise KeyError(f"MetricsLog: {name} has no columns {sorted(unknown)}; its columns are {list(columns)}.")
        handle.write(",".join(_cell(values.get(column)) for column in columns) + "\n")
        handle.flush()

    def episode(self, frames: int, episode_return: float, length: int) -> None:
        """Logs a finished training episode."""
        self._write("episodes.csv", {"frames": frames, "return": episode_return, "length": length})
        if self._writer is not None:
            self._writer.add_scalar("train/episode_return", episode_return, frames)

    def row(self, values: Mapping[str, Any]) -> None:
        """Logs a row of ``metrics.csv`` (columns :data:`METRIC_COLUMNS`; ``frames`` needed)."""
        self._write("metrics.csv", values)
        if self._writer is not None:
            frames = int(values["frames"])
            for name, value in values.items():
                if name != "frames" and value is not None and not (isinstance(value, float) and math.isnan(value)):
                    group = "eval" if name.startswith("eval") else "perf" if name in TIMING_COLUMNS else "train"
                    self._writer.add_scalar(f"{group}/{name}", value, frames)
            self._writer.flush()

    def sizes(self) -> dict[str, int]:
        """The size of each CSV file now (a checkpoint keeps them for :meth:`truncate`)."""
        return {name: handle.tell() for name, (handle, _) in self._files.items()}

    def truncate(self, sizes: Mapping[str, int]) -> None:
        """Cuts each CSV file back to the size :meth:`sizes` gave."""
        for name, size in sizes.items():
            handle, _ = self._files[name]
            handle.flush()
            handle.truncate(size)
            handle.seek(size)

    def close(self) -> None:
        """Closes the files and the TensorBoard writer."""
        for handle, _ in self._files.values():
            handle.close()
        if self._writer is not None:
            self._writer.close()


def read_csv(path: Path) -> list[dict[str, float | None]]:
    """The rows of one of the run's CSV files, as numbers (``None`` for empty cells).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "m.csv"
        >>> _ = path.write_text("frames,eval_return\\n1000,-5.5\\n2000,\\n")
        >>> read_csv(path)
        [{'frames': 1000.0, 'eval_return': -5.5}, {'frames': 2000.0, 'eval_return': None}]
    """
    with open(path, newline="") as handle:
        return [
            {key: (float(value) if value != "" else None) for key, value in row.items()}
            for row in csv.DictReader(io.StringIO(handle.read()))
        ]


def plot_returns(folder: Path, path: Path, title: str) -> None:
    """Plots the training returns (each episode, and their running mean) and the
    evaluation returns against frames, from the run's CSV files, into ``path`` (PNG).

    Raises:
        ImportError: if matplotlib is missing (``pip install "cadence[train]"``).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> log = MetricsLog(folder, tensorboard=False)
        >>> for k in range(1, 6):
        ...     log.episode(frames=200 * k, episode_return=-1000.0 + 150 * k, length=200)
        ...     log.row({"frames": 200 * k, "eval_return": -900.0 + 150 * k})
        >>> log.close()
        >>> plot_returns(folder, folder / "returns.png", "ddpg on Pendulum-v1")
        >>> (folder / "returns.png").read_bytes()[:4]
        b'\\x89PNG'
    """
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install 'cadence[train]'") from None
    matplotlib.use("Agg")  # files only: no display needed
    from matplotlib import pyplot as plt

    episodes = read_csv(folder / "episodes.csv")
    metrics = [row for row in read_csv(folder / "metrics.csv") if row.get("eval_return") is not None]
    figure, axes = plt.subplots(figsize=(7, 4.2))
    if episodes:
        frames = [row["frames"] for row in episodes]
        returns = [row["return"] for row in episodes]
        axes.plot(frames, returns, ".", color="tab:blue", alpha=0.35, markersize=4, label="training episode")
        window = max(1, min(10, len(returns) // 5))
        smooth = [sum(returns[max(0, i - window + 1): i + 1]) / len(returns[max(0, i - window + 1): i + 1])
                  for i in range(len(returns))]
        axes.plot(frames, smooth, color="tab:blue", label=f"training (mean of {window})")
    if metrics:
        axes.plot([row["frames"] for row in metrics], [row["eval_return"] for row in metrics], "o-",
                  color="tab:orange", label="evaluation (deterministic)")
    axes.set_xlabel("environment frames")
    axes.set_ylabel("episode return")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


class ProgressDisplay:
    """A progress bar over frames (tqdm) with frames per second and the latest training
    and evaluation returns; without tqdm, or with ``enabled=False``, a line per
    evaluation.

    Args:
        total: the frames of the whole run.
        initial: frames already done (on resume).
        enabled: show the bar.
        out: where the lines go (the bar writes to standard error).

    Examples:
        >>> import io
        >>> out = io.StringIO()
        >>> display = ProgressDisplay(total=1000, initial=0, enabled=False, out=out)
        >>> display.update(500, fps=1234.0, train_return=-800.0, eval_return=None)
        >>> display.evaluated(500, -700.0)
        >>> display.close()
        >>> out.getvalue()
        'frames      500/1000  fps  1234  train return   -800.0  eval return   -700.0\\n'
    """

    def __init__(self, total: int, initial: int, enabled: bool, out: TextIO | None = None) -> None:
        self.total = total
        self.out = out if out is not None else sys.stdout
        self._bar = None
        self._last: dict[str, Any] = {"frames": initial, "fps": None, "train": None, "eval": None}
        if enabled:
            try:
                import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm.tqdm(total=total, initial=initial, unit="frame", dynamic_ncols=True, smoothing=0.1)

    @staticmethod
    def _number(value: float | None, width: int = 8) -> str:
        return f"{value:{width}.1f}" if value is not None else f"{'-':>{width}}"

    def update(self, frames: int, fps: float, train_return: float | None, eval_return: float | None) -> None:
        """Moves the bar to ``frames`` and shows the latest figures."""
        if train_return is not None:
            self._last["train"] = train_return
        if eval_return is not None:
            self._last["eval"] = eval_return
        self._last["fps"] = fps
        if self._bar is not None:
            self._bar.update(frames - self._last["frames"])
            self._bar.set_postfix_str(
                f"train {self._number(self._last['train'], 1)} eval {self._number(self._last['eval'], 1)}",
                refresh=False,
            )
        self._last["frames"] = frames

    def evaluated(self, frames: int, eval_return: float) -> None:
        """Shows an evaluation (a line of its own when there is no bar)."""
        self._last["eval"] = eval_return
        if self._bar is None:
            fps = self._last["fps"] or 0.0
            print(
                f"frames {frames:>8}/{self.total}  fps {fps:5.0f}  train return {self._number(self._last['train'])}"
                f"  eval return {self._number(eval_return)}",
                file=self.out,
                flush=True,
            )

    def close(self) -> None:
        """Closes the bar."""
        if self._bar is not None:
            self._bar.close()
