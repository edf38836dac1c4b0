"""``Checkpoint``: a training run's state (networks, optimizer, replay buffer, collector,
exploration, counters, generators, config), saved as one folder or one file and
restored into the live objects, whole or in part.

Examples:
    >>> import tempfile, torch
    >>> source, target = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    >>> folder = tempfile.mkdtemp()
    >>> path = Checkpoint(policy=source, trainer_state={"frames": 10}).save(f"{folder}/run.ckpt")
    >>> state = {"frames": 0}
    >>> result = Checkpoint(policy=target, trainer_state=state).load(path)
    >>> sorted(result.loaded), state, torch.equal(target.weight, source.weight)
    (['policy', 'trainer_state'], {'frames': 10}, True)
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import tensordict
import torch

from cadence import __version__ as cadence_version
from cadence.checkpoint._containers import MANIFEST, open_checkpoint, write_archive, write_directory
from cadence.checkpoint._files import FORMAT, VERSION, check_name, file_record, seal_manifest, to_json
from cadence.checkpoint._kinds import apply_component, compatibility, kind_of, read_component, save_component
from cadence.checkpoint.report import CheckpointError, CheckpointLoadResult

__all__ = ["Checkpoint", "CheckpointFormat", "CheckpointStrictness"]

CheckpointFormat = Literal["directory", "archive"]
CheckpointStrictness = Literal["error", "warn", "ignore"]
_FORMATS = ("directory", "archive")
_STRICTNESS = ("error", "warn", "ignore")
_TENSOR_LOAD_KWARGS = ("weights_only", "mmap")


class Checkpoint:
    """Named components of a training run, saved together and restored into the same
    objects (whole, or a chosen subset of them).

    A component is any object with ``state_dict()``/``load_state_dict()`` (modules,
    optimizers, collectors, exploration modules, target updaters,
    :class:`~cadence.checkpoint.GlobalRNGState`), with ``dumps()``/``loads()`` (Cadence
    replay buffers: their own crash-safe folder format), a ``torch.Generator``, or a value:
    a dict or list (restored *in place*, so a loop holding the dict sees the resumed
    values), a number or a string (returned in the load's ``values``). With an object's
    state go the states of the ``torch.Generator`` objects it holds (an exploration
    module's, an env's ``rng``): Cadence draws from such generators, so a resumed run
    draws what the unbroken run would have drawn.

    Files hold data only: reading a checkpoint runs no code (``torch.load(weights_only=True)``
    and JSON; no pickle). Writing is crash-safe: a new checkpoint is written aside and
    replaces the previous one atomically. A simulator's hidden state (a gymnasium env's
    physics) is in no component: a restored collector keeps its counters and starts new
    episodes, as the reference's does (``cadence train`` restores simulators too).

    Args:
        format: ``"directory"`` (a folder: ``LATEST`` naming a ``checkpoint-<id>/`` tree)
            or ``"archive"`` (one zip file).
        strict: what ``load`` does when a requested component is missing from the
            checkpoint, was written by another kind of object, or fails to load (its
            file damaged, unsafe, or not fitting): ``"error"`` raises
            :class:`CheckpointError`, ``"warn"`` warns and skips it, ``"ignore"`` skips
            it; the load's result lists it either way.
        archive_compression: ``"stored"`` (no compression) or ``"deflate"``, for archives.
        save_components: the components ``save`` writes when not told (all if ``None``).
        **components: the components, by name (letters, digits, ``_``, ``.``, ``-``).

    Examples:
        >>> import tempfile, torch
        >>> from cadence.checkpoint import GlobalRNGState
        >>> net = torch.nn.Linear(2, 2)
        >>> checkpoint = Checkpoint(format="archive", policy=net, rng=GlobalRNGState(), metrics={"loss": 0.5})
        >>> path = checkpoint.save(tempfile.mkdtemp() + "/run.ckpt")
        >>> path.is_file(), sorted(Checkpoint.manifest(path)["components"])
        (True, ['metrics', 'policy', 'rng'])
    """

    def __init__(
        self,
        *,
        format: CheckpointFormat = "directory",
        strict: CheckpointStrictness = "error",
        archive_compression: Literal["stored", "deflate"] = "stored",
        save_components: Collection[str] | None = None,
        **components: Any,
    ) -> None:
        self.format = _checked_format(format)
        self.strict = _checked_strict(strict)
        if archive_compression not in ("stored", "deflate"):
            raise ValueError(f"archive_compression must be 'stored' or 'deflate', got {archive_compression!r}.")
        self.archive_compression = archive_compression
        self._components: dict[str, Any] = {}
        for name, component in components.items():
            self.register(name, component)
        self.save_components = (
            None if save_components is None else frozenset(self._selection(save_components, "save_components"))
        )

    # ------------------------------------------------------------------ components
    @property
    def components(self) -> Mapping[str, Any]:
        """The registered components by name (a read-only view; the objects themselves
        are the live ones).

        Examples:
            >>> state = {"frames": 0}
            >>> checkpoint = Checkpoint(trainer_state=state)
            >>> checkpoint.components["trainer_state"]["frames"] = 5
            >>> state
            {'frames': 5}
        """
        return MappingProxyType(self._components)

    def __contains__(self, name: object) -> bool:
        return name in self._components

    def register(self, name: str, component: Any) -> Checkpoint:
        """Adds a component; returns the checkpoint.

        Raises:
            ValueError: the name is taken or not a safe name.
            TypeError: the object is of no kind a checkpoint can hold.

        Examples:
            >>> Checkpoint().register("steps", {"n": 0}).register("steps", {})
            Traceback (most recent call last):
            ...
            ValueError: Checkpoint.register: a component named 'steps' is already registered.
        """
        check_name(name, "Checkpoint: a component name")
        if name in self._components:
            raise ValueError(f"Checkpoint.register: a component named {name!r} is already registered.")
        try:
            kind_of(component)
        except TypeError as error:
            raise TypeError(f"Checkpoint: component {name!r}: {error}") from None
        self._components[name] = component
        return self

    def _selection(self, names: Collection[str] | None, argument: str) -> list[str]:
        """The registered names in ``names`` (all if ``None``), in registration order."""
        if names is None:
            return list(self._components)
        if isinstance(names, str):
            raise TypeError(f"{argument} must be a collection of component names, got the string {names!r}.")
        wanted = set(names)
        unknown = sorted(map(str, wanted - set(self._components)))
        if unknown:
            raise ValueError(
                f"{argument}: {unknown} are not registered components (registered: {list(self._components)})."
            )
        return [name for name in self._components if name in wanted]

    # ------------------------------------------------------------------ saving
    def save(
        self,
        path: str | Path,
        *,
        components: Collection[str] | None = None,
        format: CheckpointFormat | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Path:
        """Writes the components into ``path``, crash-safely (the previous checkpoint there
        stays whole until the new one is).

        Args:
            path: the folder (``"directory"``) or file (``"archive"``); parents are made.
            components: the names to save (``save_components``, or all, if ``None``).
            format: this save's container, instead of the checkpoint's.
            metadata: JSON values recorded in the manifest.

        Returns:
            The absolute path written.

        Raises:
            TypeError: a component's state holds something a checkpoint cannot hold
                without code (named); nothing is published.
            CheckpointError: ``path`` is a file where a folder goes, or the reverse.

        Examples:
            >>> import tempfile
            >>> checkpoint = Checkpoint(config={"lr": 1e-3}, trainer_state={"frames": 0})
            >>> path = checkpoint.save(tempfile.mkdtemp() + "/ckpt", components={"trainer_state"})
            >>> list(Checkpoint.manifest(path)["components"])
            ['trainer_state']
        """
        destination = _local_path(path)
        container = self.format if format is None else _checked_format(format)
        selected = self._selection(self.save_components if components is None else components, "components")
        recorded = to_json(dict(metadata or {}), "metadata")

        def write(root: Path) -> None:
            records: dict[str, Any] = {}
            for name in selected:
                component = self._components[name]
                folder = root / "components" / name
                written = save_component(component, folder, f"component {name!r}")
                files = {
                    file.relative_to(folder).as_posix(): file_record(file, checksum=written != "dumps")
                    for file in sorted(folder.rglob("*"))
                    if file.is_file()
                }
                records[name] = {"kind": written, "type": _type_name(component), "files": files}
            body = {
                "format": FORMAT,
                "version": VERSION,
                "container": container,
                "created_at": datetime.now(timezone.utc).isoformat(),
                "versions": _versions(),
                "metadata": recorded,
                "components": records,
            }
            (root / MANIFEST).write_bytes(seal_manifest(body))

        if container == "directory":
            write_directory(destination, write)
        else:
            write_archive(destination, write, self.archive_compression)
        return destination

    # ------------------------------------------------------------------ loading
    def load(
        self,
        path: str | Path,
        *,
        components: Collection[str] | None = None,
        map_location: Any = None,
        tensor_load_kwargs: Mapping[str, Any] | None = None,
        strict: CheckpointStrictness | None = None,
    ) -> CheckpointLoadResult:
        """Restores the components (all, or ``components``) from the checkpoint at ``path``.

        Before any component changes, every requested file is checked against the
        manifest (present, size), and every state is read and checked (checksum, data
        only, modules' entries and shapes, optimizers' parameter groups, generators).
        The components are then loaded in registration order, replay buffers last: a
        buffer checks its own files' checksums and fit as it loads, whole or not at all.
        A component that refuses its state at that point stops the load under
        ``strict="error"``, the ones before it loaded.

        Args:
            path: the folder or archive ``save`` wrote.
            components: the names to restore (all registered ones if ``None``).
            map_location: where tensors saved on an accelerator go: a device, or a dict
                from saved devices (``"cuda:0"``) to devices. Tensors saved on the CPU stay
                on the CPU (a collector's state stays where the collector runs); with
                ``None`` every tensor goes back to the device it was saved from. Modules
                and optimizers copy the loaded values onto their own devices either way.
            tensor_load_kwargs: accepted for the reference's ``{"weights_only": True,
                "mmap": True}``: files are always read with ``weights_only=True``
                (``False`` is ignored, with a warning: a checkpoint is data); ``mmap``
                has no effect (states are copied into the components).
            strict: this load's strictness, instead of the checkpoint's.

        Returns:
            What was loaded, missing, incompatible (with the reason), and the values.

        Raises:
            FileNotFoundError: nothing is at ``path``.
            CheckpointError: the manifest is unreadable, or (``strict="error"``) a
                requested component is missing, of another kind, or its file is missing,
                truncated, damaged, unsafe or does not fit; the message names the
                component and the file.

        Examples:
            >>> import tempfile, torch
            >>> path = Checkpoint(policy=torch.nn.Linear(2, 1)).save(tempfile.mkdtemp() + "/ckpt")
            >>> Checkpoint(policy=torch.nn.Linear(3, 1)).load(path)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            cadence.checkpoint.report.CheckpointError: component 'policy': .../state.pt: does not fit this Linear: 'weight' has shape [1, 2] in the checkpoint, [1, 3] in this module.
        """
        source = _local_path(path)
        level = self.strict if strict is None else _checked_strict(strict)
        mover = _checked_map_location(map_location)
        _check_tensor_load_kwargs(tensor_load_kwargs)
        requested = self._selection(components, "components")
        with open_checkpoint(source) as reader:
            manifest = reader.manifest
            stored: dict[str, Any] = manifest["components"]
            result = CheckpointLoadResult(
                missing={name for name in requested if name not in stored},
                unrequested=set(stored) - set(requested),
                manifest=manifest,
                comparison=_compare_versions(manifest.get("versions")),
            )
            for name in requested:
                if name in stored:
                    reason = compatibility(stored[name]["kind"], self._components[name])
                    if reason is not None:
                        result.incompatible[name] = f"{reader.shown(name, '')}: {reason}"
            _report(result, level, "Checkpoint.load: ", source)
            usable = [name for name in requested if name in stored and name not in result.incompatible]

            prepared: dict[str, Any] = {}
            for name in usable:  # read and check everything before anything changes
                record = stored[name]
                try:
                    folder = reader.folder(name, record["files"])
                    prepared[name] = read_component(
                        record["kind"],
                        self._components[name],
                        folder,
                        record["files"],
                        lambda relative, name=name: reader.shown(name, relative),
                        mover,
                    )
                except CheckpointError as error:
                    self._failed(result, name, reader.reword(str(error)), level, error)

            ordered = sorted(prepared, key=lambda name: stored[name]["kind"] == "dumps")  # stable: buffers last
            for name in ordered:
                record = stored[name]
                try:
                    value = apply_component(
                        record["kind"], self._components[name], prepared[name], reader.shown(name, "")
                    )
                except Exception as error:  # a buffer's own checks, or a component refusing its state
                    self._failed(result, name, reader.reword(str(error)), level, error)
                    continue
                result.loaded.add(name)
                if record["kind"] in ("json", "data"):
                    result.values[name] = value
        return result

    @staticmethod
    def _failed(
        result: CheckpointLoadResult, name: str, reason: str, level: str, error: Exception
    ) -> None:
        """Records that component ``name`` could not be loaded; raises or warns as ``level`` says."""
        result.incompatible[name] = reason
        message = f"component {name!r}: {reason}"
        if level == "error":
            raise CheckpointError(message, result) from error
        if level == "warn":
            warnings.warn(f"Checkpoint.load: {message.rstrip('.')} (skipped).", UserWarning, stacklevel=3)

    # ------------------------------------------------------------------ inspecting
    @classmethod
    def manifest(cls, path: str | Path) -> dict[str, Any]:
        """The checked manifest of the checkpoint at ``path`` (no payload is read).

        Raises:
            FileNotFoundError: nothing is at ``path``.
            CheckpointError: ``path`` holds no readable Cadence checkpoint.

        Examples:
            >>> import tempfile
            >>> path = Checkpoint(value={"a": 1}).save(tempfile.mkdtemp() + "/ckpt", metadata={"step": 3})
            >>> Checkpoint.manifest(path)["metadata"]
            {'step': 3}
        """
        with open_checkpoint(_local_path(path)) as reader:
            return reader.manifest

    @classmethod
    def is_checkpoint(cls, path: str | Path) -> bool:
        """Whether ``path`` holds a readable Cadence checkpoint (its manifest checks out).

        Examples:
            >>> import tempfile
            >>> Checkpoint.is_checkpoint(tempfile.mkdtemp())
            False
        """
        try:
            cls.manifest(path)
        except (CheckpointError, OSError, ValueError):
            return False
        return True

    def __repr__(self) -> str:
        return f"Checkpoint(format={self.format!r}, strict={self.strict!r}, components={list(self._components)})"


# ---------------------------------------------------------------------- checks and helpers
def _checked_format(format: Any) -> str:
    if format not in _FORMATS:
        raise ValueError(f"Checkpoint format must be 'directory' or 'archive', got {format!r}.")
    return format


def _checked_strict(strict: Any) -> str:
    if strict not in _STRICTNESS:
        raise ValueError(f"Checkpoint strict must be 'error', 'warn' or 'ignore', got {strict!r}.")
    return strict


def _checked_map_location(map_location: Any) -> Any:
    if map_location is None or isinstance(map_location, (str, torch.device, Mapping)):
        return map_location
    raise TypeError(
        f"Checkpoint.load: map_location must be None, a device (str or torch.device) or a dict from saved "
        f"devices to devices, got {type(map_location).__name__}."
    )


def _check_tensor_load_kwargs(kwargs: Mapping[str, Any] | None) -> None:
    if not kwargs:
        return
    unknown = sorted(set(kwargs) - set(_TENSOR_LOAD_KWARGS))
    if unknown:
        raise TypeError(
            f"Checkpoint.load: tensor_load_kwargs accepts {list(_TENSOR_LOAD_KWARGS)}, got {unknown} as well."
        )
    if kwargs.get("weights_only", True) is False:
        warnings.warn(
            "Checkpoint.load: tensor_load_kwargs={'weights_only': False} is ignored: Cadence reads checkpoints "
            "with weights_only=True (they hold data, and no file is allowed to run code).",
            UserWarning,
            stacklevel=3,
        )


def _report(result: CheckpointLoadResult, level: str, prefix: str, source: Path) -> None:
    """Raises or warns (as ``level`` says) about missing and incompatible components."""
    if not result.missing and not result.incompatible:
        return
    parts = []
    if result.missing:
        parts.append(f"the checkpoint holds no {sorted(result.missing)}")
    parts.extend(f"component {name!r}: {reason}" for name, reason in sorted(result.incompatible.items()))
    message = f"{source}: {'; '.join(parts)}."
    if level == "error":
        raise CheckpointError(message, result)
    if level == "warn":
        warnings.warn(f"{prefix}{message.rstrip('.')} (skipped).", UserWarning, stacklevel=3)


def _local_path(path: str | Path) -> Path:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"a checkpoint path must be a str or a Path, got {type(path).__name__}.")
    if "://" in str(path):
        raise ValueError(f"only local checkpoint paths are supported, got {str(path)!r}.")
    return Path(path).expanduser().absolute()


def _type_name(component: Any) -> str:
    kind = type(component)
    return f"{kind.__module__}.{kind.__qualname__}"


def _versions() -> dict[str, str]:
    return {"cadence": cadence_version, "torch": str(torch.__version__), "tensordict": str(tensordict.__version__)}


def _compare_versions(recorded: Any) -> dict[str, Any]:
    if not isinstance(recorded, Mapping):
        return {}
    versions = {
        name: {"checkpoint": recorded[name], "runtime": runtime, "matches": recorded[name] == runtime}
        for name, runtime in _versions().items()
        if isinstance(recorded.get(name), str)
    }
    return {"versions": versions, "version_skew": any(not entry["matches"] for entry in versions.values())}
