"""The serving logic of ``POST /v1/openrlhf/{rubric}``, OpenRLHF's remote reward model.

The protocol (what OpenRLHF posts and reads, the route's query parameters, how a query is read
back into a prompt and a response) is `jurybox.serving.service.openrlhf_protocol`; its names are
importable from here too.

The route's serving logic is `answer_openrlhf`: the samples become items, scored through the
scoring service's `score_items` as ``/v1/score``'s are. What an unscored sample becomes has no
default: the URL (``?unscored=error`` or a number) or the service (``jurybox serve
--openrlhf-unscored``) must say it. ``?prechecks=on`` and ``?canaries=<share>`` guard the reward
against a policy that games it: `jurybox.serving.service.guards`. Everything here is linear in
the body's size: no regular expression runs on a client's text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import TYPE_CHECKING, Any

from jurybox.judges.parsing import REASON_CODES, reason_code
from jurybox.rubrics import Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import Reward, RewardSpec, Scale, Unscored, UnscoredReward, policy_text
from jurybox.serving.errors import Invalid, RequestProblem, TooLarge, Unscorable
from jurybox.serving.problems import problem_for
from jurybox.serving.service.checklists import label_checklist
from jurybox.serving.service.guards import check_guard_options, guard_for, guarded_records
from jurybox.serving.service.openrlhf_protocol import (
    Filter,
    OpenRLHFRequest,
    Options,
    response_of,
    strip_trailing_special,
)

if TYPE_CHECKING:
    from jurybox.serving.service.scoring import ScoringService

logger = logging.getLogger("jurybox.serving.openrlhf")
# The route's refusals and unscored samples, logged where the service logs its requests.
service_logger = logging.getLogger("jurybox.serving")


def items_of(
    request: OpenRLHFRequest, max_items: int, max_field_chars: int, checklist: bool = False
) -> list[dict[str, Any]]:
    """The score request's items, from OpenRLHF's samples.

    Question = prompt, response = the query after (the end of) the prompt, its trailing special
    tokens dropped, reference = the label (when not empty). The counts and lengths are checked
    before any text is looked at. ``checklist`` (the route's rubric is a checklist rubric): the
    label carries the item's checklist (`label_checklist`).
    """
    n = len(request.query)
    if n > max_items:
        raise TooLarge(
            f"{n} samples; this service takes at most {max_items} per request (max_items)",
            "query",
        )
    for name in ("prompts", "labels"):
        given = getattr(request, name)
        if given is not None and len(given) != n:
            raise Invalid(
                f"{name} has {len(given)} entries and query "
                f"{n}: OpenRLHF sends one of each per sample",
                name,
            )
    for name, texts, limit in (
        ("query", request.query, 2 * max_field_chars),
        ("prompts", request.prompts or [], max_field_chars),
        ("labels", request.labels or [], max_field_chars),
    ):
        for k, text in enumerate(texts):
            if text is not None and len(text) > limit:
                raise Invalid(
                    f"{name}[{k}] has {len(text)} "
                    f"characters; this service takes at most {limit} "
                    "(max_field_chars"
                    + (", twice for prompt and response)" if name == "query" else ")"),
                    f"{name}[{k}]",
                )
    items = []
    for k, given in enumerate(request.query):
        # The policy's text: a lone surrogate is replaced, as the adapters do (`policy_text`).
        query, replaced = policy_text(given)
        prompt, more = policy_text(request.prompts[k] if request.prompts is not None else "")
        if replaced + more:
            logger.warning(
                "OpenRLHF sample %d: %d lone surrogate(s), not Unicode text, each replaced "
                "by U+FFFD before judging",
                k,
                replaced + more,
            )
        response = response_of(query, prompt) if prompt else query
        if response is None:
            raise Invalid(
                "the query begins neither with its prompt "
                "nor with the prompt's end (OpenRLHF's query is the prompt, or "
                "its end when cut to max_len, followed by the response)",
                f"query[{k}]",
            )
        item: dict[str, Any] = {
            "id": str(k),
            "question": prompt,
            "response": strip_trailing_special(response),
        }
        label = request.labels[k] if request.labels is not None else None
        if label and checklist:
            item.update(label_checklist(policy_text(label)[0], k))
        elif label:
            item["reference"] = policy_text(label)[0]
        items.append(item)
    return items


def split_unsent(
    items: list[dict[str, Any]], max_field_chars: int
) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """The items to judge, and the positions of those not sent with why.

    A response over ``max_field_chars`` (a runaway generation) is the policy's answer, not bad
    input: it is unscored with its reason, rewarded by the route's unscored policy, as the
    adapters do, where sending it would fail the whole request (and OpenRLHF's step) with a 422.
    """
    sent, unsent = [], {}
    for k, item in enumerate(items):
        size = len(item["response"])
        if size > max_field_chars:
            unsent[k] = (
                f"response: {size:,} characters, more than the limit of {max_field_chars:,} "
                "(max_field_chars): not sent to the judges"
            )
        else:
            sent.append(item)
    return sent, unsent


def merged(
    records: list[dict[str, Any]], unsent: dict[int, str], rubric: Rubric, jury: str
) -> list[dict[str, Any]]:
    """``records`` (of the items sent) with an unscored record, saying why, at each unsent one."""
    if not unsent:
        return records
    names = [c.name for c in rubric.criteria]
    if rubric.checklist is not None and rubric.checklist.score == "points":
        names = [rubric.checklist.name]  # (the item's score; its points were not judged)
    if rubric.formula is not None:
        names.append(rubric.formula.name)
    judged = iter(records)
    out = []
    for k in range(len(records) + len(unsent)):
        if k not in unsent:
            out.append(next(judged))
            continue
        out.append(
            {
                "id": str(k),
                "status": "unscored",
                "rubric": rubric.name,
                "jury": jury,
                "provenance": "",
                "scores": dict.fromkeys(names),
                "calibrated": dict.fromkeys(names),
                "reasons": [unsent[k]],
                "votes": [],
            }
        )
    return out


# An item's field as OpenRLHF named it: a problem with items[k].response is one with query[k].
_FIELDS = {
    "question": "prompts",
    "response": "query",
    "reference": "labels",
    "checklist": "labels",
    "id": "query",
}


def renamed(problem: RequestProblem) -> RequestProblem:
    """``problem`` with an item's field named as OpenRLHF's body names it.

    ``items[0].response`` -> ``query[0]``, in its field and its message.
    """
    field = problem.field or ""
    if not field.startswith("items["):
        return problem
    index, _, rest = field[len("items[") :].partition("]")
    head = rest.lstrip(".").split(".")[0].split("[")[0]
    name = _FIELDS.get(head)
    if name is None or not index.isdigit():
        return problem
    ours = f"{name}[{index}]"
    if head == "checklist":  # a point of the label's checklist: named as it is
        ours += rest
    return problem.moved(problem.message.replace(field, ours), ours)


def answer(
    reward: Reward,
    criteria: list[Reward],
    records: list[dict[str, Any]],
    spans: dict[str, float],
    scores: Filter = "reward",
    fixed: dict[int, float] | None = None,
    extra: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """OpenRLHF's answer for the verdicts: rewards, scores and extra logs.

    The rewards; ``scores`` the rewards or the jury's agreement (`agreement`, for OpenRLHF's dynamic
    filter); ``extra_logs`` per sample: ``jurybox/unscored``, ``jurybox/unscored_reason`` (the
    code's position in `REASON_CODES`, 0 when scored) and each criterion's reward
    (``jurybox/<criterion>``; where it has none, the unscored value, or NaN when the policy is an
    error). A 422 naming the unscored items when the reward's policy is an error. ``fixed``:
    the rewards of samples that were not judged (pre-checked), by position; ``extra``: more
    ``extra_logs`` per sample (the guards').
    """
    fixed = fixed or {}
    try:
        values = reward.values(r for k, r in enumerate(records) if k not in fixed)
    except UnscoredReward as exc:  # in the route's terms (unscored=none is refused here)
        said = UnscoredReward(
            exc.unscored,
            "The route's unscored policy is ?unscored=error (a 422, which fails OpenRLHF's "
            "step); give ?unscored=<number> in --reward.remote_url to reward an unscored "
            "sample with that number instead (OpenRLHF needs a number for every sample)",
        )
        raise Unscorable(str(said), "unscored") from None
    judged = iter(float(v) for v in values if v is not None)  # (unscored=none is refused before)
    rewards = [fixed[k] if k in fixed else next(judged) for k in range(len(records))]
    flags, reasons = [], []
    for record in records:
        raw, why = reward.raw(record)
        flags.append(0.0 if raw is not None else 1.0)
        reasons.append(0.0 if raw is not None else float(REASON_CODES.index(reason_code(why))))
    logs: dict[str, float | list[float]] = {
        "jurybox/unscored": flags,
        "jurybox/unscored_reason": reasons,
    }
    for each in criteria:
        logs[f"jurybox/{each.score}"] = [
            math.nan if v is None else float(v) for v in each.values(records)
        ]
    logs.update(extra or {})
    if len(records) == 1:  # OpenRLHF's one-sample requests: numbers, as it logs them
        logs = {k: v[0] if isinstance(v, list) else v for k, v in logs.items()}
    filtered = rewards if scores == "reward" else [agreement(r, spans) for r in records]
    return {"rewards": rewards, "scores": filtered, "extra_logs": logs}


def agreement(record: dict[str, Any], spans: dict[str, float]) -> float:
    """1 minus the judges' mean spread on a verdict's criteria.

    Each criterion's spread is its range of votes over its scale's span ``spans[name]``: 1 when
    every judge gave the same scores, 0 for an unscored verdict.
    """
    parts = [
        min(1.0, d["range"] / spans[name])
        for name, d in (record.get("disagreement") or {}).items()
        if d.get("range") is not None and spans.get(name)
    ]
    if record.get("status") != "scored" or not parts:
        return 0.0
    return 1.0 - sum(parts) / len(parts)


def reward_options(
    score: str | None,
    scale: Scale,
    calibrated: bool,
    unscored: str | None,
    default: str | None = None,
) -> RewardSpec:
    """The reward of the route's query parameters; 422 naming the parameter at fault.

    ``unscored`` from the URL, else the service's ``default``. No unscored policy at all is a 422
    too: which number a failed judgment becomes is the user's choice, never ours.
    """
    given = unscored if unscored is not None else default
    if given is None:
        raise Invalid(
            "say what an unscored sample's reward is: "
            "add ?unscored=<number> to --reward.remote_url (e.g. ?unscored=0), or "
            "?unscored=error to stop the step, or start the service with "
            "--openrlhf-unscored",
            "unscored",
        )
    policy: Unscored = "error"
    if given != "error":
        try:
            policy = float(given)
        except ValueError:
            raise Invalid(
                f"unscored={given!r}: give error (an "
                "unscored sample is a 422) or the number its reward should be "
                "(OpenRLHF needs a number for every sample)",
                "unscored",
            ) from None
    try:
        return RewardSpec(score=score, scale=scale, calibrated=calibrated, unscored=policy)
    except ValueError as exc:
        raise Invalid(f"bad reward options: {exc}", "unscored") from None


async def answer_openrlhf(
    service: ScoringService,
    rubric: str,
    request: OpenRLHFRequest,
    options: Options,
    request_id: str = "",
) -> bytes:
    """POST /v1/openrlhf/{rubric}: OpenRLHF's remote reward model, scored as /v1/score scores.

    See the module's docstring. The answer as JSON (a criterion without a value in
    ``extra_logs`` is NaN, which OpenRLHF's JSON reader takes). A refused sample is logged here
    with the request's id: OpenRLHF drops an error's body.
    """
    try:
        reward = reward_options(
            options.score,
            options.scale,
            options.calibrated,
            options.unscored,
            service.plan.openrlhf_unscored,
        )
        check_guard_options(options, reward)
        return await _answer(service, rubric, request, reward, options, request_id or "-")
    except RequestProblem as exc:
        problem = renamed(exc)
        answered = problem_for(problem)
        service_logger.warning(
            "OpenRLHF request %s refused (%d %s): %s [field %s]",
            request_id or "-",
            answered.status,
            answered.kind,
            problem.message[:500],
            problem.field,
        )
        raise problem from None


async def _answer(
    service: ScoringService,
    rubric_name: str,
    request: OpenRLHFRequest,
    reward: RewardSpec,
    options: Options,
    request_id: str,
) -> bytes:
    if reward.unscored == "none":
        raise Invalid(
            "unscored=none is not possible here: "
            "OpenRLHF needs a number for every sample (give unscored=error "
            "or a value)",
            "unscored",
        )
    rubric = service.named_rubric(rubric_name)
    if reward.calibrated and service.provenances[rubric_name] not in service.calibrations:
        raise Invalid(
            f"calibrated=true, but this service has "
            f"no calibration map for rubric {rubric_name} (start it with "
            "--calibration MAP)",
            "calibrated",
        )
    criteria_policy: Unscored = reward.unscored if isinstance(reward.unscored, float) else "none"
    # (a checklist rubric's points differ per sample: no reward per criterion to log)
    points = rubric.checklist is not None and rubric.checklist.score == "points"
    try:
        bound = reward.bind(rubric)
        criteria = [
            RewardSpec(
                score=c.name,
                scale=reward.scale,
                calibrated=reward.calibrated,
                unscored=criteria_policy,
            ).bind(rubric)
            for c in ([] if points else rubric.criteria)
        ]
    except InputError as exc:
        raise Invalid(str(exc), exc.field) from None
    limits = service.limits
    raw = await asyncio.to_thread(
        items_of, request, limits.max_items, limits.max_field_chars, rubric.checklist is not None
    )
    if not raw:
        raise Invalid("query is empty; send at least one sample", "query")
    sent, unsent = split_unsent(raw, limits.max_field_chars)
    guard = guard_for(service, rubric_name, reward, options)  # (pre-checks, canaries)
    prechecked: dict[int, str] = {}
    if guard is not None:
        records, unsent, prechecked = await guarded_records(
            service, rubric_name, guard, raw, unsent, request_id
        )
    else:
        records = await service.score_items(rubric_name, sent, allow_empty=True) if sent else []
    records = merged(records, unsent, rubric, service.jury.name)
    spans = {c.name: c.scale.high - c.scale.low for c in rubric.criteria}
    if points:  # each point's votes spread on met's scale
        span = rubric.criteria[0].scale.high - rubric.criteria[0].scale.low
        spans = {key: span for r in records for key in r.get("points") or {}}
    fixed, extra = guard.answered(len(records), prechecked) if guard else ({}, None)
    given = await asyncio.to_thread(
        answer, bound, criteria, records, spans, options.scores, fixed, extra
    )
    for k, record in enumerate(records):
        value, why = bound.raw(record)
        if value is None and k not in prechecked:  # (those: logged by the guard)
            service_logger.warning(
                "OpenRLHF request %s: sample %d unscored (%s), rewarded %s: %s",
                request_id,
                k,
                reason_code(why),
                reward.unscored,
                why[:300],
            )
    return json.dumps(given).encode()
