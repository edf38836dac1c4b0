"""Tests for cadence.utils: timeit, get_available_device, compile_with_warmup, logger."""

from __future__ import annotations

import re
import shutil
import sys
import threading
import time
import types
import warnings
from typing import Any, Callable, Iterator

import pytest
import torch
import torch._dynamo

from cadence.utils import compile_with_warmup, get_available_device, logger, timeit


@pytest.fixture(autouse=True)
def fresh_timer() -> Iterator[None]:
    """Each test starts and leaves with an empty timing table and printevery count."""
    timeit.reset()
    yield
    timeit.reset()


def calls_of(name: str) -> int:
    """The call count of ``name``, read from the public print-out."""
    match = re.search(rf"^{re.escape(name)} took .* over (\d+) calls", timeit.print(), flags=re.M)
    if match is None:
        raise LookupError(f"{name!r} is not in the timing table")
    return int(match.group(1))


# --------------------------------------------------------------------------- timeit


def test_context_manager_adds_time_and_count() -> None:
    for _ in range(3):
        with timeit("nap"):
            time.sleep(0.01)
    total = timeit.todict(percall=False)["nap"]
    assert total >= 0.03
    assert timeit.todict()["nap"] == pytest.approx(total / 3)
    assert calls_of("nap") == 3


def test_context_manager_returns_the_timer_and_elapsed_grows() -> None:
    with timeit("block") as timer:
        first = timer.elapsed()
        time.sleep(0.005)
        second = timer.elapsed()
    assert isinstance(timer, timeit)
    assert 0.0 <= first < second


def test_time_is_recorded_when_the_body_raises() -> None:
    with pytest.raises(ZeroDivisionError):
        with timeit("failing"):
            1 / 0
    assert calls_of("failing") == 1


def test_decorator_times_each_call_and_keeps_the_function_identity() -> None:
    @timeit("add")
    def add(a: int, b: int) -> int:
        """Adds two ints."""
        return a + b

    assert add(1, 2) == 3
    assert add(b=4, a=5) == 9
    assert add.__name__ == "add" and add.__doc__ == "Adds two ints."
    assert calls_of("add") == 2


def test_decorator_times_recursive_calls_each_with_its_own_start() -> None:
    @timeit("countdown")
    def countdown(n: int) -> int:
        time.sleep(0.002)
        return 0 if n == 0 else 1 + countdown(n - 1)

    assert countdown(3) == 3
    assert calls_of("countdown") == 4
    # nested calls overlap: the outermost alone took >= 4 naps, so the total is >= 4+3+2+1 naps
    assert timeit.todict(percall=False)["countdown"] >= 10 * 0.002


def test_decorator_counts_every_call_from_many_threads() -> None:
    @timeit("threaded")
    def work() -> None:
        pass

    def loop() -> None:
        for _ in range(500):
            work()

    threads = [threading.Thread(target=loop) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls_of("threaded") == 4000


def test_decorator_rejects_a_non_callable() -> None:
    with pytest.raises(TypeError, match=r"timeit\('x'\) decorates a callable, got int"):
        timeit("x")(3)  # type: ignore[arg-type]


def test_name_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="name must be a str, got int"):
        timeit(3)  # type: ignore[arg-type]


def test_start_and_elapsed_without_a_with_block_record_nothing() -> None:
    timer = timeit("long run").start()
    time.sleep(0.005)
    assert timer.elapsed() >= 0.005
    assert timeit.todict() == {}


def test_elapsed_before_start_names_the_timer() -> None:
    with pytest.raises(RuntimeError, match=r"timeit\('idle'\)\.elapsed\(\): the timer has not been started"):
        timeit("idle").elapsed()


def test_sync_is_harmless_without_cuda() -> None:
    with timeit("synced", sync=True):
        torch.ones(3).sum()

    @timeit("synced fn", sync=True)
    def fn() -> int:
        return 1

    assert fn() == 1
    assert set(timeit.todict()) == {"synced", "synced fn"}


def test_mark_start_and_mark_end_record_one_event() -> None:
    timeit.mark_start("episode")
    time.sleep(0.005)
    timeit.mark_end("episode")
    assert timeit.todict()["episode"] >= 0.005
    assert calls_of("episode") == 1


def test_mark_end_without_mark_start_names_the_event() -> None:
    timeit.mark_start("other")
    with pytest.raises(KeyError, match=r"no pending mark_start\('episode'\); pending marks: \['other'\]"):
        timeit.mark_end("episode")


def test_todict_prefix_and_totals() -> None:
    for name, repeats in (("a", 1), ("b", 2)):
        for _ in range(repeats):
            with timeit(name):
                time.sleep(0.002)
    per_call = timeit.todict(prefix="time")
    totals = timeit.todict(percall=False, prefix="time")
    assert list(per_call) == ["time/a", "time/b"] == list(totals)
    assert totals["time/b"] == pytest.approx(2 * per_call["time/b"])
    assert list(timeit.todict()) == ["a", "b"]


def test_erase_zeroes_the_entries_but_keeps_the_names() -> None:
    with timeit("kept"):
        pass
    timeit.erase()
    assert timeit.todict() == {"kept": 0.0}
    assert timeit.todict(percall=False) == {"kept": 0.0}
    assert calls_of("kept") == 0
    with timeit("kept"):
        pass
    assert calls_of("kept") == 1


def test_reset_forgets_names_marks_and_the_printevery_count(capsys: pytest.CaptureFixture[str]) -> None:
    with timeit("gone"):
        pass
    timeit.mark_start("pending")
    timeit.printevery(1, 10)  # call 0 prints
    timeit.printevery(1, 10)  # call 1 does not
    timeit.reset()
    assert timeit.todict() == {}
    with pytest.raises(KeyError):
        timeit.mark_end("pending")
    with timeit("again"):
        pass
    capsys.readouterr()
    timeit.printevery(1, 10)  # the count restarted: this is call 0 again
    assert "again took" in capsys.readouterr().out


def test_print_lines_are_sorted_prefixed_and_go_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("zeta", "alpha"):
        with timeit(name):
            pass
    text = timeit.print(prefix="iter 3")
    lines = text.splitlines()
    assert [line.split(" took")[0] for line in lines] == ["iter 3 -- alpha", "iter 3 -- zeta"]
    assert "over 1 calls since the last erase" in lines[0]
    out = capsys.readouterr().out
    assert "iter 3 -- alpha took" in out and "iter 3 -- zeta took" in out


def test_print_of_an_empty_table_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert timeit.print() == ""
    assert capsys.readouterr().out == ""


def test_printevery_prints_num_prints_times_over_total_count(capsys: pytest.CaptureFixture[str]) -> None:
    with timeit("step"):
        pass
    for _ in range(20):
        timeit.printevery(5, 20)  # every 4 calls: 0, 4, 8, 12, 16
        with timeit("step"):
            pass
    assert capsys.readouterr().out.count("step took") == 5


def test_printevery_prints_every_call_when_total_count_is_below_num_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with timeit("step"):
        pass
    for _ in range(3):
        timeit.printevery(1000, 3)
    assert capsys.readouterr().out.count("step took") == 3


def test_printevery_erase_makes_each_print_cover_the_calls_since_the_last(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for _ in range(6):
        with timeit("step"):
            pass
        timeit.printevery(2, 6, erase=True, prefix="run")  # prints on calls 0 and 3
    out = capsys.readouterr().out
    assert re.findall(r"run -- step took .* over (\d+) calls", out) == ["1", "3"]
    assert calls_of("step") == 2  # calls 4 and 5, since the erase after call 3


def test_printevery_zero_prints_never(capsys: pytest.CaptureFixture[str]) -> None:
    with timeit("step"):
        pass
    for _ in range(5):
        timeit.printevery(0, 5)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("num_prints", "total_count"), [(-1, 10), (10, -1)])
def test_printevery_rejects_negative_arguments(num_prints: int, total_count: int) -> None:
    with pytest.raises(ValueError, match="num_prints and total_count must be >= 0"):
        timeit.printevery(num_prints, total_count)


def test_logger_writes_info_to_the_current_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    logger.info("updating weights")
    logger.debug("not shown at the default level")
    out = capsys.readouterr().out
    assert "[cadence][INFO] updating weights" in out
    assert "not shown" not in out


# --------------------------------------------------------------------------- get_available_device


@pytest.fixture
def accelerators(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Makes torch report the given accelerators as available (none by default)."""

    def set_available(cuda: bool = False, npu: bool | None = None, mps: bool = False) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
        if npu is None:
            monkeypatch.delattr(torch, "npu", raising=False)
        else:
            monkeypatch.setattr(torch, "npu", types.SimpleNamespace(is_available=lambda: npu), raising=False)

    return set_available


@pytest.mark.parametrize(
    ("available", "expected"),
    [
        ({"cuda": True, "npu": True, "mps": True}, "cuda:0"),
        ({"npu": True, "mps": True}, "npu:0"),
        ({"npu": False, "mps": True}, "mps:0"),
        ({"mps": True}, "mps:0"),
        ({"npu": False}, "cpu"),
        ({}, "cpu"),
    ],
)
def test_get_available_device_follows_cuda_npu_mps_then_cpu(
    accelerators: Callable[..., None], available: dict[str, bool], expected: str
) -> None:
    accelerators(**available)
    assert get_available_device(return_str=True) == expected
    if expected != "npu:0":  # torch.device("npu") parses only once the torch_npu plugin is imported
        assert get_available_device() == torch.device(expected)
        assert isinstance(get_available_device(), torch.device)


def test_get_available_device_on_this_machine_is_usable() -> None:
    device = get_available_device()
    assert torch.ones(2, device=device).sum().item() == 2.0


# --------------------------------------------------------------------------- compile_with_warmup


class CountingBackend:
    """A torch.compile backend that counts the graphs it compiles and runs them as traced."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs += 1
        return graph_module.forward


def failing_backend(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    raise RuntimeError("toolchain exploded")


def our_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if str(w.message).startswith("compile_with_warmup")]


@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_runs_uncompiled_for_warmup_calls_then_compiled(warmup: int) -> None:
    backend = CountingBackend()
    ran: list[int] = []

    def affine(x: torch.Tensor) -> torch.Tensor:
        return 3 * x + 1

    fast = compile_with_warmup(affine, backend=backend, warmup=warmup)
    for i in range(warmup):
        assert fast(torch.tensor(float(i))).item() == 3 * i + 1
        ran.append(i)
    assert backend.graphs == 0
    assert fast(torch.tensor(2.0)).item() == 7.0
    assert backend.graphs == 1
    assert fast(torch.tensor(5.0)).item() == 16.0
    assert backend.graphs == 1  # compiled once, reused
    assert fast.__name__ == "affine" and fast.__wrapped__ is affine


def test_decorator_factory_and_model_keyword() -> None:
    backend = CountingBackend()

    @compile_with_warmup(backend=backend, warmup=1)
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    assert double(torch.tensor(1.0)).item() == 2.0 and backend.graphs == 0
    assert double(torch.tensor(2.0)).item() == 4.0 and backend.graphs == 1

    other = CountingBackend()
    half = compile_with_warmup(model=lambda x: x / 2, backend=other, warmup=0)
    assert half(torch.tensor(4.0)).item() == 2.0 and other.graphs == 1


def test_compiles_a_module_and_keeps_its_parameters() -> None:
    backend = CountingBackend()
    module = torch.nn.Linear(3, 2)
    fast = compile_with_warmup(module, backend=backend, warmup=1)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(fast(x), module(x))
    torch.testing.assert_close(fast(x), module(x))
    assert backend.graphs == 1
    with torch.no_grad():
        module.weight.zero_()
        module.bias.fill_(1.0)
    torch.testing.assert_close(fast(x), torch.ones(4, 2))


def test_errors_of_the_function_itself_propagate() -> None:
    def strict(x: torch.Tensor) -> torch.Tensor:
        if x.item() < 0:
            raise ValueError("x must be >= 0")
        return x

    fast = compile_with_warmup(strict, backend="eager", warmup=1)
    with pytest.raises(ValueError, match="x must be >= 0"):
        fast(torch.tensor(-1.0))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="x must be >= 0"):
            fast(torch.tensor(-1.0))
    assert our_warnings(record) == []


def test_no_cxx_compiler_falls_back_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "cadence-test-no-such-compiler")

    def update(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fast = compile_with_warmup(update, mode="reduce-overhead", warmup=1)
        results = [fast(torch.tensor(float(i))).item() for i in range(3)]
    assert fast is update
    assert results == [1.0, 2.0, 3.0]
    messages = our_warnings(record)
    assert len(messages) == 1
    assert "torch.compile skipped for" in messages[0] and "update" in messages[0]
    assert "'cadence-test-no-such-compiler' was not found" in messages[0]
    assert messages[0].endswith("it runs uncompiled")


def test_backends_that_need_no_compiler_ignore_a_missing_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "cadence-test-no-such-compiler")
    backend = CountingBackend()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fast = compile_with_warmup(lambda x: x - 1, backend=backend, warmup=0)
        assert fast(torch.tensor(1.0)).item() == 0.0
    assert backend.graphs == 1
    assert our_warnings(record) == []


def test_unsupported_python_falls_back_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)

    def adv(x: torch.Tensor) -> torch.Tensor:
        return x * 0.5

    with pytest.warns(UserWarning, match=r"skipped for '.*adv'.*does not support this Python") as record:
        fast = compile_with_warmup(adv, backend="eager")
    assert fast is adv
    assert len(our_warnings(record.list)) == 1


def test_a_backend_failure_falls_back_once_without_running_the_call_twice() -> None:
    ran: list[float] = []

    def step(x: torch.Tensor) -> torch.Tensor:
        ran.append(1.0)
        return x * 10

    fast = compile_with_warmup(step, backend=failing_backend, warmup=1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        results = [fast(torch.tensor(float(i))).item() for i in range(4)]
    assert results == [0.0, 10.0, 20.0, 30.0]
    assert len(ran) == 4  # the failed compile ran nothing of the call: no step ran twice
    messages = our_warnings(record)
    assert len(messages) == 1
    assert "step" in messages[0] and "the backend failed to compile it" in messages[0]
    assert "toolchain exploded" in messages[0]


def test_fullgraph_that_cannot_be_one_graph_is_compiled_with_graph_breaks() -> None:
    # the reference's DDPG/DQN scripts ask fullgraph=True of their exploring policy; Cadence's
    # exploration modules draw from their own torch.Generator, which TorchDynamo does not trace
    generator = torch.Generator().manual_seed(0)
    backend = CountingBackend()

    def noisy(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + torch.randn(x.shape, generator=generator)

    fast = compile_with_warmup(noisy, backend=backend, warmup=0, fullgraph=True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        results = [fast(torch.ones(3)) for _ in range(3)]
    messages = our_warnings(record)
    assert len(messages) == 1 and "noisy' cannot be compiled as one graph" in messages[0]
    assert "compiled with graph breaks instead" in messages[0]
    replay = torch.Generator().manual_seed(0)
    for result in results:  # one draw per call: the failed fullgraph trace ran nothing
        torch.testing.assert_close(result, torch.ones(3) * 2 + torch.randn(3, generator=replay))
    assert backend.graphs >= 1

    def unsupported(x: torch.Tensor) -> torch.Tensor:  # without fullgraph Dynamo breaks the graph itself
        return x + torch.randn(x.shape, generator=generator)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        compile_with_warmup(unsupported, backend=backend, warmup=0)(torch.ones(2))
    assert our_warnings(record) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"warmup": -1}, ValueError, "warmup must be >= 0, got -1"),
        ({"warmup": 1.5}, TypeError, "warmup must be an int, got float"),
        ({"warmup": True}, TypeError, "warmup must be an int, got bool"),
    ],
)
def test_bad_warmup_is_rejected(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        compile_with_warmup(lambda x: x, backend="eager", **kwargs)
    with pytest.raises(error, match=match):
        compile_with_warmup(backend="eager", **kwargs)


def test_a_non_callable_model_is_rejected() -> None:
    with pytest.raises(TypeError, match="model must be a callable .* got int: 3"):
        compile_with_warmup(3, backend="eager")  # type: ignore[call-overload]


def test_bad_compile_arguments_fail_at_construction() -> None:
    with pytest.raises(RuntimeError, match="mode or options"):
        compile_with_warmup(lambda x: x, backend="eager", mode="default", options={})


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="inductor needs a C++ compiler")
def test_inductor_compiles_on_cpu_when_a_compiler_is_present() -> None:
    def poly(x: torch.Tensor) -> torch.Tensor:
        return x * x + 2 * x + 1

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fast = compile_with_warmup(poly, warmup=1)
        x = torch.linspace(-1, 1, 8)
        torch.testing.assert_close(fast(x), poly(x))
        torch.testing.assert_close(fast(x), poly(x))
    assert fast is not poly
    assert our_warnings(record) == []
    assert sys.version_info >= (3, 11)
