"""The README runs as a newcomer runs it: every code block, and every command it shows.

Everything runs in a fresh folder holding only the files the README tells the reader to
save (a block whose first line is ``# file: NAME``), each block and command in a process
of its own started there, as a reader's shell would: python blocks with ``python -``
(which searches the current folder, as ``python`` does), shell commands with the
``cadence`` console script of this environment, a small frame budget appended to training
commands (the README's own options come first, so the budget wins); ``make demo`` runs
the Makefile's recipe the same way. Commands shown inline in the text run too, unless
listed in ``RUN_ELSEWHERE`` with the test that runs them.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CADENCE = pathlib.Path(sys.executable).parent / "cadence"  # the console script pip installed

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
# a block or command that runs longer than this has hung
TIMEOUT_S = 600


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


def _reader_environment() -> dict[str, str]:
    """This process's environment (the signing keys' folder among it), without the test
    session's additions to Python's path: the reader's shell has none."""
    return {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "PYTHONSAFEPATH")}


def _run(argv: list[str], folder: pathlib.Path, shown: str, stdin: str | None = None) -> str:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=folder, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env=_reader_environment())
    assert done.returncode == 0, f"README {shown} (run as {shlex.join(argv[:6])} ...) exited {done.returncode}:\n" \
                                 f"{done.stderr[-3000:]}\n{done.stdout[-2000:]}"
    print(f"{time.perf_counter() - start:6.1f} s  {shown}", file=sys.__stdout__)
    return done.stdout


def _run_command(command: str, folder: pathlib.Path, ran: list[str], skipped: list[str]) -> None:
    argv = _argv(command)
    missing = _needs_missing_extra(argv)
    if missing:
        skipped.append(f"{command}: {missing}")
        return
    _run([str(CADENCE), *argv], folder, f"command {command!r}")
    ran.append(command)


def test_every_block_and_command_of_the_readme_runs(tmp_path: pathlib.Path) -> None:
    assert CADENCE.is_file(), f"no cadence console script beside {sys.executable}: is the package installed?"
    text = README.read_text()
    ran: list[str] = []
    skipped: list[str] = []
    printed = []
    blocks = _blocks(text)
    saved = []
    for _, block in blocks:  # the files first: a command may come before the file it reads
        first = block.splitlines()[0] if block else ""
        if first.startswith("# file: "):
            name = first.removeprefix("# file: ").strip()
            (tmp_path / name).write_text(block)
            saved.append(name)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(saved)  # nothing else in the folder
    for number, (language, block) in enumerate(blocks):
        if block.startswith("# file: "):
            continue
        if language == "python":
            printed.append(_run([sys.executable, "-"], tmp_path, f"python block {number}", stdin=block))
        elif language == "bash":
            for command in _shell_commands(block):
                if command in RUN_ELSEWHERE or command in ran:
                    continue
                _run_command(command, tmp_path, ran, skipped)
        else:
            pytest.fail(f"a README block of language {language!r} that this test does not know how to run")
    for command in _inline_commands(text):
        if command not in RUN_ELSEWHERE and command not in ran:
            _run_command(command, tmp_path, ran, skipped)
    assert "reward" in "".join(printed)
    assert {"make demo", "cadence train --resume runs/cheetah", "cadence eval runs/demo --episodes 5",
            "cadence train td3 --env thermostat:Thermostat-v0 --total-frames 3000 --eval-interval 1000"} <= set(ran)
    assert (tmp_path / "runs" / "ddpg-Pendulum-v1-seed3" / "policy.pt").is_file()  # the --config run
    assert (tmp_path / "runs" / "td3-thermostat-Thermostat-v0-seed0" / "policy.pt").is_file()
    for reason in skipped:
        print(f"README command not run: {reason}")
    assert len(skipped) <= 1  # only the dm_control one may lack its extra


def test_run_elsewhere_commands_are_still_in_the_readme() -> None:
    text = README.read_text()
    for command, where in RUN_ELSEWHERE.items():
        assert command in text, f"{command!r} left the README: drop it from RUN_ELSEWHERE ({where})"
    assert (ROOT / "tests" / "examples" / "test_ddpg_tutorial.py").is_file()


def test_make_demo_installs_what_training_needs_and_make_test_adds_the_test_extras() -> None:
    makefile = (ROOT / "Makefile").read_text()
    rules = dict(re.findall(r"^([$()A-Z_a-z.-]+): *(.*)$", makefile, flags=re.M))
    recipes = {target: re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, flags=re.M).group(1)
               for target in ("$(TRAIN_STAMP)", "$(STAMP)")}
    assert rules["demo"] == "$(TRAIN_STAMP)" and rules["$(STAMP)"] == "$(TRAIN_STAMP)" and rules["test"] == "$(STAMP)"
    assert re.findall(r"-e \"\.\[([a-z,_]*)\]\"", recipes["$(TRAIN_STAMP)"]) == ["train"]
    assert '-e ".[test,train]"' in recipes["$(STAMP)"]
