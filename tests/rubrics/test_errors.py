"""Every exception class jurybox defines survives pickling with its message and fields.

An error raised in a Ray worker (verl's ``remote`` reward manager, the Ray engine's actors, the
service's replicas) reaches the driver pickled; one that cannot be rebuilt becomes Ray's
``Failed to deserialize exception`` and its cause is lost (#59: ``VerlUnscored``,
``MissingRewards``). The classes are found by walking the package, so a new one is covered
without being listed here.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

import jurybox

#: Modules whose optional library is not installed here are skipped by the walk, and said.
OPTIONAL = ("inspect_ai",)
#: Raised only as one of its kinds (each in problems.STATUSES, each walked here), never itself.
ABSTRACT = ("jurybox.serving.errors.RequestProblem",)


def jurybox_exceptions() -> list[type[BaseException]]:
    """Every subclass of Exception defined in a jurybox module (each module imported)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(jurybox.__path__, "jurybox."):
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            if exc.name in OPTIONAL:
                continue
            raise
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, Exception)
                and value.__module__.startswith("jurybox.")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found) if k not in ABSTRACT]


def example_argument(name: str, annotation: str) -> object:
    """A value for an ``__init__`` parameter, from its name and (string) annotation."""
    if name in ("unscored", "missing") or annotation.startswith("list[tuple"):
        return [("row 3", "smollm2-135m: prompt is 900 tokens"), ("row 5", "below quorum")]
    if "dict" in annotation:
        return {"Retry-After": "2"}
    if "bool" in annotation:
        return True
    if "int" in annotation:
        return 503
    return f"the {name}"


def instance(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` made as its own ``__init__`` takes it, every argument given."""
    signature = inspect.signature(cls.__init__)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    if any(p.kind is p.VAR_POSITIONAL for p in params):  # an exception's own __init__
        return cls("something went wrong in row 3")
    args, kwargs = [], {}
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            continue
        value = example_argument(p.name, str(p.annotation))
        if p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    return cls(*args, **kwargs)


CLASSES = jurybox_exceptions()


def test_the_walk_finds_the_errors_that_cross_processes():
    names = {c.__name__ for c in CLASSES}
    assert {"VerlUnscored", "MissingRewards", "UnscoredReward", "InputError", "ServiceError"} <= (
        names
    )
    assert len(CLASSES) > 25, names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_error_class_survives_pickling_with_its_message_and_fields(cls):
    exc = instance(cls)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc) and back.args == exc.args
    assert vars(back) == vars(exc)  # its fields: field, unscored, status, ...
