"""How each kind of component is written into its folder of a checkpoint, read back,
checked against the live object, and loaded into it.

Kinds, in the order a component is recognised:

- ``"generator"``: a ``torch.Generator`` (its ``get_state()``);
- ``"dumps"``: an object with ``dumps(path)`` and ``loads(path)``, such as a Cadence
  replay buffer (its own crash-safe, checksummed folder format, under ``buffer/``);
- ``"state_dict"``: an object with ``state_dict()`` and ``load_state_dict()`` (modules,
  optimizers, collectors, exploration modules, target updaters, ``GlobalRNGState``),
  written to ``state.pt`` with the states of the ``torch.Generator`` objects it holds
  (see :func:`held_generators`): Cadence draws from such generators, not from the
  global ones, so a resumed run needs them to draw what the unbroken run would have;
- ``"json"`` / ``"data"``: a value (dict, list, number, string): ``value.json`` when
  JSON can hold it, else ``state.pt`` (a dict holding tensors, say).

Examples:
    >>> import torch
    >>> kind_of(torch.nn.Linear(1, 1)), kind_of({"frames": 0}), kind_of(torch.Generator())
    ('state_dict', 'value', 'generator')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import torch

from cadence.checkpoint._files import read_json, read_state, to_json, write_json, write_state
from cadence.checkpoint.report import CheckpointError
from cadence.data.replay_buffers.checkpoint import CheckpointError as FileCheckpointError

__all__ = ["apply_component", "compatibility", "held_generators", "kind_of", "read_component", "save_component"]

STATE_FILE = "state.pt"
VALUE_FILE = "value.json"
BUFFER_FOLDER = "buffer"
_VALUES = (Mapping, list, tuple, str, int, float, bool, type(None))


def kind_of(component: Any) -> str:
    """The kind of ``component`` (``"generator"``, ``"dumps"``, ``"state_dict"`` or
    ``"value"``; a value is written as ``"json"`` or ``"data"``).

    Raises:
        TypeError: ``component`` is none of these.

    Examples:
        >>> kind_of(object())
        Traceback (most recent call last):
        ...
        TypeError: a checkpoint component needs state_dict()/load_state_dict(), dumps()/loads(), or to be a torch.Generator, a dict, a list or a plain value; got object.
    """
    if isinstance(component, torch.Generator):
        return "generator"
    if callable(getattr(component, "dumps", None)) and callable(getattr(component, "loads", None)):
        return "dumps"
    if callable(getattr(component, "state_dict", None)) and callable(getattr(component, "load_state_dict", None)):
        return "state_dict"
    if isinstance(component, _VALUES):
        return "value"
    raise TypeError(
        "a checkpoint component needs state_dict()/load_state_dict(), dumps()/loads(), or to be a "
        f"torch.Generator, a dict, a list or a plain value; got {type(component).__name__}."
    )


def held_generators(component: Any) -> dict[str, torch.Generator]:
    """The ``torch.Generator`` objects ``component`` holds as attributes, by where they are:
    on it, on its submodules if it is a module, or on the modules among its attributes
    (a collector's env and policy). Each generator is named once.

    Examples:
        >>> from cadence.modules import EGreedyModule
        >>> from cadence.data import OneHot
        >>> policy = torch.nn.Sequential(torch.nn.Identity(), EGreedyModule(OneHot(2)))
        >>> list(held_generators(policy))
        ['1.generator']
    """
    found: dict[str, torch.Generator] = {}
    seen: set[int] = set()

    def note(name: str, generator: torch.Generator) -> None:
        if id(generator) not in seen:
            seen.add(id(generator))
            found[name] = generator

    def walk(prefix: str, module: torch.nn.Module) -> None:
        for path, sub in module.named_modules(prefix=prefix):
            for attribute, value in vars(sub).items():
                if isinstance(value, torch.Generator):
                    note(f"{path}.{attribute}" if path else attribute, value)

    if isinstance(component, torch.nn.Module):
        walk("", component)
    elif hasattr(component, "__dict__"):
        for attribute, value in vars(component).items():
            if isinstance(value, torch.Generator):
                note(attribute, value)
            elif isinstance(value, torch.nn.Module):
                walk(attribute, value)
    return found


# ---------------------------------------------------------------------- writing
def save_component(component: Any, directory: Path, where: str) -> str:
    """Writes ``component`` into ``directory`` (created); returns the kind written.

    Raises:
        TypeError: its state holds something a checkpoint cannot hold without code.

    Examples:
        >>> import tempfile
        >>> save_component({"frames": 3}, Path(tempfile.mkdtemp()) / "trainer_state", "component 'x'")
        'json'
    """
    kind = kind_of(component)
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "dumps":
        component.dumps(directory / BUFFER_FOLDER)
    elif kind == "generator":
        write_state({"generator": component.get_state()}, directory / STATE_FILE, where)
    elif kind == "state_dict":
        generators = {name: generator.get_state() for name, generator in held_generators(component).items()}
        write_state({"state": component.state_dict(), "generators": generators}, directory / STATE_FILE, where)
    else:
        try:
            value = to_json(component, where)
        except TypeError:  # tensors, arrays, keys that are not strings: a data file keeps them as they are
            write_state(component, directory / STATE_FILE, where)
            return "data"
        write_json(value, directory / VALUE_FILE)
        return "json"
    return kind


# ---------------------------------------------------------------------- reading and loading
def compatibility(written: str, component: Any) -> str | None:
    """Why a component written as ``written`` cannot load into ``component`` (``None`` if it can).

    Examples:
        >>> compatibility("state_dict", {"frames": 0})
        "written from an object with state_dict(), this component is a dict ('value')"
    """
    try:
        kind = kind_of(component)
    except TypeError as error:
        return str(error)
    wanted = "value" if written in ("json", "data") else written
    if wanted != kind:
        return f"written from {_DESCRIPTIONS[wanted]}, this component is a {type(component).__name__} ({kind!r})"
    return None


_DESCRIPTIONS = {
    "generator": "a torch.Generator",
    "dumps": "an object with dumps()/loads()",
    "state_dict": "an object with state_dict()",
    "value": "a value (dict, list, number or string)",
}


def read_component(
    written: str,
    component: Any,
    directory: Path,
    files: Mapping[str, Any],
    shown: Callable[[str], str],
    map_location: Any,
) -> Any:
    """Reads what ``directory`` holds for ``component`` and checks that it fits it;
    returns what :func:`apply_component` loads. Changes nothing.

    Args:
        written: the kind the manifest records.
        component: the live object.
        directory: the component's folder.
        files: the manifest's records of its files.
        shown: how errors name a file of the folder (from its relative path).
        map_location: where tensors saved on an accelerator go.

    Raises:
        CheckpointError: a file is missing, damaged or holds anything but data, or the
            state does not fit ``component``.
    """
    if written == "dumps":
        return directory / BUFFER_FOLDER
    if written == "json":
        value = read_json(directory / VALUE_FILE, shown(VALUE_FILE), _record(files, VALUE_FILE, shown))
        _check_value_fits(component, value, shown(VALUE_FILE))
        return value
    payload = read_state(directory / STATE_FILE, shown(STATE_FILE), _record(files, STATE_FILE, shown), map_location)
    where = shown(STATE_FILE)
    if written == "data":
        _check_value_fits(component, payload, where)
        return payload
    if written == "generator":
        if not isinstance(payload, dict) or set(payload) != {"generator"}:
            raise CheckpointError(f"{where}: expected a dict of 'generator', got {_describe(payload)}.")
        _check_generator_state(component, payload["generator"], where, "the generator")
        return payload["generator"]
    if not isinstance(payload, dict) or set(payload) != {"state", "generators"} or not isinstance(
        payload["generators"], dict
    ):
        raise CheckpointError(f"{where}: expected a dict of 'state' and 'generators', got {_describe(payload)}.")
    state, states = payload["state"], payload["generators"]
    generators = held_generators(component)
    if set(states) != set(generators):
        raise CheckpointError(
            f"{where}: the checkpoint holds the generators {sorted(map(str, states))} of this component, "
            f"this {type(component).__name__} holds {sorted(generators)}."
        )
    for name, generator in generators.items():
        _check_generator_state(generator, states[name], where, f"generator {name!r}")
    _check_state_fits(component, state, where)
    return state, states


def apply_component(written: str, component: Any, prepared: Any, shown: str) -> Any:
    """Loads what :func:`read_component` returned into ``component``; returns the value
    restored for value components (``None`` for the others).

    Raises:
        CheckpointError: ``component`` refuses the state (naming ``shown``).
    """
    if written == "dumps":
        try:
            component.loads(prepared)
        except (FileCheckpointError, FileNotFoundError) as error:  # its own checks name the file
            raise CheckpointError(str(error)) from error
        except Exception as error:
            raise CheckpointError(
                f"{shown}: does not load into this {type(component).__name__} ({type(error).__name__}: {error})."
            ) from error
        return None
    try:
        if written == "generator":
            component.set_state(prepared)
            return None
        if written == "state_dict":
            state, states = prepared
            component.load_state_dict(state)
            for name, generator in held_generators(component).items():
                generator.set_state(states[name])
            return None
    except CheckpointError:
        raise
    except Exception as error:  # the component's own checks: the state does not fit it
        raise CheckpointError(
            f"{shown}: does not load into this {type(component).__name__} ({type(error).__name__}: {error})."
        ) from error
    if isinstance(component, MutableMapping) and isinstance(prepared, Mapping):
        component.clear()  # in place: whoever holds the dict (a training loop) sees the restored values
        component.update(prepared)
        return component
    if isinstance(component, list) and isinstance(prepared, list):
        component[:] = prepared
        return component
    return prepared


def _record(files: Mapping[str, Any], name: str, shown: Callable[[str], str]) -> Mapping[str, Any]:
    record = files.get(name)
    if record is None:
        raise CheckpointError(f"{shown(name)}: the manifest does not list it (not written by this kind of component).")
    return record


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"a dict of {sorted(map(str, value))}"
    return f"a {type(value).__name__}"


def _check_generator_state(generator: torch.Generator, state: Any, where: str, what: str) -> None:
    own = generator.get_state()
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.shape != own.shape:
        found = (
            f"a {state.dtype} tensor of shape {list(state.shape)}" if isinstance(state, torch.Tensor) else _describe(state)
        )
        raise CheckpointError(
            f"{where}: {what}'s state should be a uint8 tensor of shape {list(own.shape)} (a generator on "
            f"{generator.device}), got {found}."
        )


def _check_value_fits(component: Any, value: Any, where: str) -> None:
    if isinstance(component, MutableMapping) and not isinstance(value, Mapping):
        raise CheckpointError(f"{where}: holds {_describe(value)}, this component is a {type(component).__name__}.")
    if isinstance(component, list) and not isinstance(value, list):
        raise CheckpointError(f"{where}: holds {_describe(value)}, this component is a list.")


def _check_state_fits(component: Any, state: Any, where: str) -> None:
    """Raises ``CheckpointError`` if ``state`` cannot load into a module (its entries and
    shapes) or an optimizer (its parameter groups), before anything is loaded."""
    if isinstance(component, torch.nn.Module):
        if not isinstance(state, Mapping):
            raise CheckpointError(f"{where}: a module's state should be a dict, got {_describe(state)}.")
        own = component.state_dict()
        missing = [key for key in own if key not in state]
        unexpected = [key for key in state if key not in own]
        shapes = [
            f"{key!r} has shape {list(state[key].shape)} in the checkpoint, {list(value.shape)} in this module"
            for key, value in own.items()
            if isinstance(value, torch.Tensor) and isinstance(state.get(key), torch.Tensor)
            and state[key].shape != value.shape
        ]
        problems = []
        if missing:
            problems.append(f"it lacks {_few(missing)}")
        if unexpected:
            problems.append(f"it holds entries this module has not: {_few(unexpected)}")
        problems.extend(shapes[:5])
        if problems:
            raise CheckpointError(
                f"{where}: does not fit this {type(component).__name__}: {'; '.join(problems)}."
            )
    elif isinstance(component, torch.optim.Optimizer):
        groups = state.get("param_groups") if isinstance(state, Mapping) else None
        if not isinstance(groups, list) or not all(isinstance(group, Mapping) for group in groups):
            raise CheckpointError(f"{where}: an optimizer's state should hold 'param_groups', got {_describe(state)}.")
        saved = [len(group.get("params", ())) for group in groups]
        own_sizes = [len(group["params"]) for group in component.param_groups]
        if saved != own_sizes:
            raise CheckpointError(
                f"{where}: does not fit this {type(component).__name__}: the checkpoint's parameter groups hold "
                f"{saved} parameters, this optimizer's {own_sizes}."
            )


def _few(keys: list[str]) -> str:
    shown = ", ".join(repr(key) for key in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
