"""The README runs as written: every code block, and every command it shows.

Files the README shows (a block whose first line is ``# file: NAME``) are written first,
then the other blocks run in order: python blocks as they are; shell commands run through ``cadence``'s
``main`` with a small frame budget appended to training commands (the README's own
options come first, so the budget wins); ``make demo`` runs the Makefile's recipe the
same way. Commands shown inline in the text run too, unless listed in ``RUN_ELSEWHERE``
with the test that runs them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pathlib
import re
import shlex
import sys
import time

import pytest

from cadence.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# appended to `cadence train ALGORITHM ...`: a run of a few seconds
TRAIN_BUDGET = [
    "--total-frames", "300", "--init-random-frames", "100", "--frames-per-batch", "50", "--eval-interval", "300",
    "--eval-episodes", "1", "--checkpoint-interval", "200", "--batch-size", "16", "--hidden-sizes", "16",
    "--no-video", "--no-plot", "--no-tensorboard", "--no-progress",
]
# appended to `cadence train --resume RUN` (only what a resumed run may change)
RESUME_BUDGET = ["--total-frames", "400", "--no-video", "--no-progress"]
DEMO_BUDGET = ["--steps", "500", "--rollout-steps", "10"]
# commands the README shows that another test or CI step runs
RUN_ELSEWHERE = {
    "make test": ".ci/run (CI) runs it: this test is part of it",
    "make docs": ".ci/run (CI) runs it; tests/test_docs.py tests what makes it fail",
    "make test-slow": ".ci/run (CI) runs it after make test",
    "python examples/ddpg_tutorial.py --total-frames 10000": "tests/examples/test_ddpg_tutorial.py runs the script",
}
COMMAND_PREFIXES = ("cadence ", "make ", "python ")
# inline spans that name a command in the text rather than show one to run
MENTIONS = {"cadence train"}


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def _shell_commands(block: str) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in block.splitlines())
    return [line for line in lines if line]


def _inline_commands(text: str) -> list[str]:
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", prose)
    # a span with "...", "<...>" or a word in capitals (ALGORITHM) is a pattern, not a command
    return [
        span for span in spans
        if span.startswith(COMMAND_PREFIXES) and span not in MENTIONS and "..." not in span and "<" not in span
        and not re.search(r"\b[A-Z]{3,}\b", span)
    ]


def _makefile_recipe(target: str) -> str:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"{target}:")))
    recipe = lines[start + 1].strip()
    return recipe.replace("$(VENV)/bin/cadence", "cadence")


def _argv(command: str) -> list[str]:
    """The arguments of ``cadence`` for a README command, budget appended."""
    if command == "make demo":
        command = _makefile_recipe("demo")
    words = shlex.split(command)
    if words[:3] == ["python", "-m", "cadence"]:
        words = ["cadence", *words[3:]]
    assert words[0] == "cadence", f"the README shows a command this test cannot run: {command!r}"
    argv = words[1:]
    if argv[:1] == ["train"] and "--help" not in argv:
        argv += RESUME_BUDGET if "--resume" in argv else TRAIN_BUDGET
    elif argv[:1] == ["demo"]:
        argv += DEMO_BUDGET
    return argv


def _needs_missing_extra(argv: list[str]) -> str | None:
    env = argv[argv.index("--env") + 1] if "--env" in argv else ""
    if "/" in env and ":" not in env and importlib.util.find_spec("dm_control") is None:
        return f"{env} needs the dm_control extra"
    return None


def _run(command: str, ran: list[str], skipped: list[str]) -> None:
    argv = _argv(command)
    missing = _needs_missing_extra(argv)
    if missing:
        skipped.append(f"{command}: {missing}")
        return
    status = 0
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            status = main(argv)
        except SystemExit as exit_:  # --help
            status = exit_.code or 0
    assert status == 0, f"README command {command!r} (run as cadence {' '.join(argv)}) exited {status}:\n" \
                        f"{err.getvalue()}\n{out.getvalue()[-2000:]}"
    ran.append(command)
    print(f"{time.perf_counter() - start:6.1f} s  {command}", file=sys.__stdout__)


def test_every_block_and_command_of_the_readme_runs(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # runs/ and the README's files go here
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():  # the Ray tests' (tests/conftest.py): the README starts its own
        ray.shutdown()
    monkeypatch.syspath_prepend(str(tmp_path))  # the modules the README saves import from here
    text = README.read_text()
    ran: list[str] = []
    skipped: list[str] = []
    printed = []
    blocks = _blocks(text)
    for _, block in blocks:  # the files first: a command may come before the file it reads
        first = block.splitlines()[0] if block else ""
        if first.startswith("# file: "):
            (tmp_path / first.removeprefix("# file: ").strip()).write_text(block)
    for language, block in blocks:
        if block.startswith("# file: "):
            continue
        if language == "python":
            exec(compile(block, str(README), "exec"), {})
            printed.append(capsys.readouterr().out)
        elif language == "bash":
            for command in _shell_commands(block):
                if command in RUN_ELSEWHERE or command in ran:
                    continue
                _run(command, ran, skipped)
        else:
            pytest.fail(f"a README block of language {language!r} that this test does not know how to run")
    for command in _inline_commands(text):
        if command not in RUN_ELSEWHERE and command not in ran:
            _run(command, ran, skipped)
    sys.modules.pop("thermostat", None)
    assert "reward" in "".join(printed)
    assert {"make demo", "cadence train --resume runs/cheetah", "cadence eval runs/demo --episodes 5"} <= set(ran)
    assert (tmp_path / "runs" / "ddpg-Pendulum-v1-seed3" / "policy.pt").is_file()  # the --config run
    for reason in skipped:
        print(f"README command not run: {reason}")
    assert len(skipped) <= 1  # only the dm_control one may lack its extra


def test_run_elsewhere_commands_are_still_in_the_readme() -> None:
    text = README.read_text()
    for command, where in RUN_ELSEWHERE.items():
        assert command in text, f"{command!r} left the README: drop it from RUN_ELSEWHERE ({where})"
    assert (ROOT / "tests" / "examples" / "test_ddpg_tutorial.py").is_file()
