"""The verdict cache: identical records for the same item and configuration, misses for a changed
input or configuration, the size bound, and a fully cached run that builds no backend. Scripted
backends stand in for judges (the cache's bookkeeping); the CLI with the real tiny judges is in
``tests/serving/runs/test_cache_estimate.py``."""

from __future__ import annotations

import math
import pickle

import pytest
from judging_helpers import ACCURACY_PREFIX, one_criterion_rubric

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Generation, TokenStep
from jurybox.judges.cache import VerdictCache
from jurybox.rubrics import Item

RUBRIC = one_criterion_rubric()
PREFIX = ACCURACY_PREFIX


class Counting:
    """Answers 3 (p 0.8) to everything and counts the prompts it was given."""

    def __init__(self) -> None:
        self.asked = 0

    def generate(self, requests, cancelled=None):
        self.asked += len(requests)
        top = {"3": math.log(0.8), "4": math.log(0.2)}
        steps = [
            TokenStep(0, PREFIX, {PREFIX: 0.0}),
            TokenStep(len(PREFIX), "3", top),
            TokenStep(len(PREFIX) + 1, "}", {"}": 0.0}),
        ]
        return [Generation(text=PREFIX + "3}", steps=steps, latency_s=0.123)] * len(requests)

    def close(self) -> None:
        pass


def spec(method: str = "mean") -> JurySpec:
    return JurySpec.model_validate(
        {
            "name": "j",
            "aggregation": {"method": method},
            "judges": [{"name": "a", "model": "org/not-a-model"}],
        }
    )


def items(*responses: str) -> list[Item]:
    return [Item(id=f"i{k}", question="q", response=r) for k, r in enumerate(responses)]


@pytest.fixture
def cache(tmp_path):
    c = VerdictCache(tmp_path / "verdicts.sqlite")
    yield c
    c.close()


def test_a_cached_item_gives_the_identical_record_and_builds_no_backend(cache):
    backend = Counting()
    first = Jury(spec(), {"a": backend}, cache=cache).score(RUBRIC, items("x", "y"))
    assert backend.asked == 2
    # A jury with no backends at all: building one for org/not-a-model would fail.
    again = Jury(spec(), cache=cache)
    second = again.score(RUBRIC, items("x", "y"))
    assert [v.to_record() for v in second] == [v.to_record() for v in first]
    assert again.cache_hits == 2 and again._backends == {}


def test_a_changed_input_or_configuration_is_judged_again(cache):
    backend = Counting()
    Jury(spec(), {"a": backend}, cache=cache).score(RUBRIC, items("x", "y"))
    jury = Jury(spec(), {"a": backend}, cache=cache)
    verdicts = jury.score(RUBRIC, items("x", "changed"))
    assert backend.asked == 3 and jury.cache_hits == 1
    assert [v.id for v in verdicts] == ["i0", "i1"]  # in order, cached and fresh mixed
    other = Jury(spec("median"), {"a": backend}, cache=cache)
    other.score(RUBRIC, items("x", "y"))
    assert backend.asked == 5 and other.cache_hits == 0


def test_the_size_bound_evicts_the_least_recently_used(tmp_path):
    small = VerdictCache(tmp_path / "v.sqlite", max_bytes=10_000)
    jury = Jury(spec(), {"a": Counting()}, cache=small)
    for k in range(30):  # ~1 kB per verdict: the bound holds about ten
        jury.score(RUBRIC, [Item(id=f"n{k}", question="q", response="r")])
        jury.score(RUBRIC, [Item(id="n0", question="q", response="r")])  # kept in use
    stats = small.stats()
    assert 0 < stats.bytes <= 10_000 and stats.entries < 30
    prov = jury.provenance(RUBRIC)
    from jurybox.rubrics import input_hash

    kept = small.contains(
        prov, [input_hash(Item(id=f"n{k}", question="q", response="r")) for k in range(30)]
    )
    newest = input_hash(Item(id="n29", question="q", response="r"))
    oldest = input_hash(Item(id="n1", question="q", response="r"))
    used = input_hash(Item(id="n0", question="q", response="r"))
    assert newest in kept and used in kept and oldest not in kept


def test_stats_and_clear(cache):
    Jury(spec(), {"a": Counting()}, cache=cache).score(RUBRIC, items("x", "y", "z"))
    Jury(spec("median"), {"a": Counting()}, cache=cache).score(RUBRIC, items("x"))
    stats = cache.stats()
    assert stats.entries == 4 and stats.by_jury == {"j": 4} and stats.bytes > 0
    prov = Jury(spec("median")).provenance(RUBRIC)
    assert cache.clear(provenance=prov) == 1
    assert cache.clear(jury="someone-else") == 0
    assert cache.clear() == 3 and cache.stats().entries == 0


def test_the_cache_travels_by_path(cache):
    clone = pickle.loads(pickle.dumps(cache))
    Jury(spec(), {"a": Counting()}, cache=cache).score(RUBRIC, items("x"))
    assert clone.path == cache.path and clone.stats().entries == 1
    clone.close()
