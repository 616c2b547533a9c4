"""Group rewards: the completions of one prompt rewarded against each other, as GRPO compares them.

In GRPO the advantage of a completion is its reward minus its group's mean.

A pointwise jury scores each completion alone, on a coarse scale: a group's rewards often tie
(its spread is zero, and GRPO learns nothing from it). A `GroupSpec` says how a group is
judged instead (its calls per group: `GroupSpec.cost`):

* ``pointwise``: each completion alone (``use="expected"``: from the judges' expected scores,
  see `jurybox.judges.resolution`), the baseline;
* ``round_robin``, ``regular``, ``swiss``, ``anchor``: comparisons inside the group on a
  pairwise rubric, each pair judged in both orders (the swap is what makes it a comparison:
  a judge that always picks the first answer ties every pair), on every pair, on a random
  design of ``per_completion`` comparisons per completion, in ``per_completion`` Swiss rounds
  (completions of similar standing meet), or against one anchor (the completion with the
  group's median pointwise score); the reward is each completion's Bradley-Terry probability
  of beating a groupmate drawn at random (or its win share), ties half a win
  (`jurybox.judges.rankings`);
* ``listwise``: one prompt shows the whole group, the answers lettered in a shuffled order per
  judge and per call, and each judge scores every answer on the rubric in one call; the
  position effect is measured by the shuffle;
* **mixed** (``weight``): the pointwise reward plus ``weight`` times the group's term, so a
  group the comparisons cannot separate still gets the pointwise signal (TournO's mixture).

The group's term is on [0, 1], mapped onto ``[low, high]`` and centred (minus the group's mean)
when asked. A comparing design's group also says whether its spread is signal
(`GroupResult.signal`, `sign_flip_test`: its comparisons against coin flips of the same
comparisons); a group without (its rewards all tie, or its comparisons spread them no further
than coin flips) is one to drop, as DAPO's dynamic sampling drops groups of zero spread
(`no_signal_share` counts them). A completion whose comparisons are all unscored gets no reward (None) and the
reason; a group of one completion is rewarded pointwise, saying so (`GroupResult.fallback`).

The judging is `GroupJob`'s: a generator of what to judge (`Ask`: items every
judge judges, through a jury's usual path, verdict cache included: a pair is one item, its
answers in a fixed order, so a pair asked in either order is one cache entry holding both
orders; `AskEach`: one item per judge, the listwise calls) that turns the verdicts into
`GroupResult`. `judge_groups` runs it on an in-process jury; the scoring service's
``POST /v1/groups`` runs the same job on its judges.

The rooms (every name importable from here): `jurybox.judges.group_spec` (`GroupSpec`,
`GroupCost`), `jurybox.judges.group_results` (`Group`, `GroupResult`, the sign-flip test),
`jurybox.judges.listwise` (the listwise rubric), `jurybox.judges.group_rewards` (from what the
job read to a `GroupResult`); here the job (`GroupJob`, `drive`, `judge_groups`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jurybox.rubrics import Item, Rubric, VerdictRecord, Vote
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec

from . import rankings
from .group_results import (
    EXACT_PAIRS,
    SIGNAL_ALPHA,
    SIMULATED_FLIPS,
    Comparison,
    CompletionReward,
    Group,
    GroupResult,
    no_signal_share,
    sign_flip_test,
)
from .group_rewards import GroupState, PairRead, group_result, scored
from .group_spec import COMPARING, LETTERS, Design, GroupCost, GroupSpec
from .listwise import LISTWISE_SYSTEM, LISTWISE_TEMPLATE, listwise_rubric
from .resolution import ResolvedReward
from .spec import JurySpec

__all__ = [
    "COMPARING",
    "EXACT_PAIRS",
    "LETTERS",
    "LISTWISE_SYSTEM",
    "LISTWISE_TEMPLATE",
    "SIGNAL_ALPHA",
    "SIMULATED_FLIPS",
    "Ask",
    "AskEach",
    "Comparison",
    "CompletionReward",
    "Design",
    "Group",
    "GroupCost",
    "GroupJob",
    "GroupResult",
    "GroupSpec",
    "Job",
    "digest",
    "drive",
    "judge_groups",
    "listwise_rubric",
    "no_signal_share",
    "sign_flip_test",
]


# -- what to judge -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """Judge ``items`` with ``rubric`` (every judge, the jury's usual path).

    The answer is their verdict records, in order.
    """

    rubric: Rubric
    items: list[Item]


@dataclass(frozen=True)
class AskEach:
    """One item per judge: ``items[g * judges + j]`` is judge j's.

    These are the listwise calls, each judge its own order. The answer is ``(provenance, votes)``:
    the rubric's provenance with the jury, and ``votes[j][g]`` judge j's votes on its item of group
    g.
    """

    rubric: Rubric
    items: list[Item]
    judges: int


Job = Generator[list[Ask | AskEach], list[Any], list[GroupResult]]


def digest(*parts: Any) -> str:
    """A short hash of JSON-able ``parts``.

    It makes item ids from content: the same content, the same id, so the verdict cache finds it
    again.
    """
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_CORE = ("question", "reference", "context", "images")


def _item(ident: str, fields: Mapping[str, Any], checklist: bool = False, **more: Any) -> Item:
    """An item of a group's ``fields``.

    With ``checklist`` (a checklist rubric's), their checklist is the item's own, not an extra.
    """
    core = {k: fields[k] for k in _CORE if fields.get(k) is not None}
    points = fields.get("checklist") if checklist else None
    extra = {
        k: v
        for k, v in fields.items()
        if k not in _CORE and k != "response" and not (checklist and k == "checklist")
    }
    response = more.pop("response", None)
    extra.update(more)
    return Item(id=ident, response=response, extra=extra, checklist=points, **core)


class GroupJob:
    """The judging of ``groups`` under ``spec``.

    `run` is a generator of what to judge (lists of `Ask` / `AskEach`, whose answers it is sent
    back in order) that returns one `GroupResult` per group.

    Args:
        spec: How the groups are judged and what their rewards are.
        rubric: The design's rubric (pairwise for the comparing designs).
        jury: The jury that judges.
        groups: The groups of completions.
        pointwise: The pointwise rubric (the anchor's median, a mixed reward, groups of one).
        reward: Which number of a pointwise verdict is the reward (its ``unscored`` policy is
            the caller's to apply: here an unscored completion is None).

    Raises:
        InputError: ``rubric`` or ``pointwise`` does not fit the design, or a listwise design
            is given a cascaded jury.
    """

    def __init__(
        self,
        spec: GroupSpec,
        rubric: Rubric,
        jury: JurySpec,
        groups: Sequence[Group],
        pointwise: Rubric | None = None,
        reward: RewardSpec | None = None,
    ) -> None:
        spec.check(rubric, pointwise)
        self.spec, self.rubric, self.jury, self.pointwise_rubric = spec, rubric, jury, pointwise
        self.groups = list(groups)
        if spec.design == "listwise" and jury.stages:
            raise InputError(
                "a cascaded jury decides item by item, stage by stage; the "
                "listwise design asks each judge its own order: give a jury "
                "without stages",
                field="design",
            )
        base = (reward or RewardSpec()).model_copy(update={"unscored": "none"})
        self.scorer = (
            pointwise
            if pointwise is not None
            else (rubric if spec.design in ("pointwise", "listwise") else None)
        )
        self.point = (
            ResolvedReward.bind(base, self.scorer, jury, spec.use)
            if self.scorer is not None
            else None
        )
        # A pairwise verdict's number: its formula (or only criterion), A's share on [0, 1].
        self.share = (
            ResolvedReward.bind(RewardSpec(scale="raw", unscored="none"), rubric, jury, spec.use)
            if rubric.pairwise
            else None
        )
        self.listed = (
            ResolvedReward.bind(base.model_copy(update={"scale": "unit"}), rubric, jury, spec.use)
            if spec.design == "listwise"
            else None
        )
        for g, group in enumerate(self.groups):
            k = len(group.completions)
            if k == 0:
                raise InputError(
                    f"group {group.key} has no completions", field=f"groups[{g}].completions"
                )
            if k == 1 and self.point is None:
                raise InputError(
                    f"group {group.key} has one completion: a group of one is "
                    "rewarded pointwise, which needs a pointwise rubric (give "
                    "pointwise=)",
                    field=f"groups[{g}].completions",
                )
            if spec.design == "listwise" and k > len(LETTERS):
                raise InputError(
                    f"group {group.key} has {k} completions; a listwise call "
                    f"shows at most {len(LETTERS)}",
                    field=f"groups[{g}].completions",
                )

    def costs(self) -> list[GroupCost]:
        """Each group's planned judge calls per judge."""
        return [
            self.spec.cost(len(g.completions), self.rubric, self.pointwise_rubric)
            for g in self.groups
        ]

    # -- the job -------------------------------------------------------------------------------

    def run(self) -> Job:
        """The generator (see the class docstring)."""
        spec = self.spec
        states = [
            GroupState(
                g,
                group,
                len(group.completions),
                np.random.default_rng(
                    [spec.seed, int(digest(dict(group.fields), list(group.completions))[:12], 16)]
                ),
            )
            for g, group in enumerate(self.groups)
        ]
        for s in states:
            s.fallback = s.k == 1
            s.pointwise = [None] * s.k
            s.listed = [None] * s.k
        needs_point = spec.design in ("pointwise", "anchor") or spec.weight is not None
        point = [s for s in states if s.fallback or needs_point]
        rest = [s for s in states if not s.fallback]
        asks: list[tuple[Ask | AskEach, Callable[[Any], None]]] = []
        if point:
            asks.append(self._pointwise_ask(point))
        if spec.design == "anchor" and asks:
            yield from self._asked(asks)
            asks = []
        if spec.design in COMPARING and rest:
            pairs = {s.index: self._first_pairs(s) for s in rest}
            asks.append(self._pair_ask(rest, pairs))
        elif spec.design == "listwise" and rest:
            for k in sorted({s.k for s in rest}):
                asks.append(self._listwise_ask([s for s in rest if s.k == k]))
        if asks:
            yield from self._asked(asks)
        if spec.design == "swiss":
            for round_ in range(1, spec.per_completion):
                pairs = {}
                for s in rest:
                    if round_ < s.k - 1:
                        found = rankings.swiss_round(s.k, self._standing(s), set(s.compared), s.rng)
                        if found:
                            pairs[s.index] = found
                if not pairs:
                    break
                yield from self._asked(
                    [self._pair_ask([s for s in rest if s.index in pairs], pairs)]
                )
        return [
            group_result(s, spec, self.rubric, self.pointwise_rubric, self.scorer, self.point)
            for s in states
        ]

    def _asked(
        self, asks: list[tuple[Ask | AskEach, Callable[[Any], None]]]
    ) -> Generator[list[Ask | AskEach], list[Any], None]:
        answers = yield [ask for ask, _ in asks]
        for (_, read), answer in zip(asks, answers):
            read(answer)

    def _first_pairs(self, s: GroupState) -> list[tuple[int, int]]:
        design = self.spec.design
        if design == "round_robin":
            return rankings.round_robin(s.k)
        if design == "regular":
            return rankings.regular(s.k, self.spec.per_completion, s.rng)
        if design == "swiss":
            return rankings.swiss_round(s.k, [0.0] * s.k, set(), s.rng)
        anchor = self._anchor(s)
        return [] if anchor is None else rankings.star(s.k, anchor)

    def _standing(self, s: GroupState) -> list[float]:
        i, j, share = scored(s)
        shares = rankings.win_shares(s.k, i, j, share)
        return [0.5 if math.isnan(v) else float(v) for v in shares]

    # -- asks and their answers ----------------------------------------------------------------

    def _pointwise_ask(
        self, states: list[GroupState]
    ) -> tuple[Ask, Callable[[Sequence[Mapping[str, Any]]], None]]:
        scorer, point = self.scorer, self.point
        assert scorer is not None and point is not None
        items: dict[str, Item] = {}
        ids: dict[tuple[int, int], str] = {}
        for s in states:
            for c, text in enumerate(s.group.completions):
                ident = "c-" + digest(dict(s.group.fields), text)
                ids[s.index, c] = ident
                if ident not in items:
                    s.asked += scorer.judge_calls
                    items[ident] = _item(
                        ident, s.group.fields, scorer.checklist is not None, response=text
                    )

        def read(records: Sequence[Mapping[str, Any]]) -> None:
            by_id = {str(r["id"]): r for r in records}
            for s in states:
                for c in range(s.k):
                    s.pointwise[c] = point.read(by_id[ids[s.index, c]])

        return Ask(scorer, list(items.values())), read

    def _pair_ask(
        self, states: list[GroupState], pairs: Mapping[int, list[tuple[int, int]]]
    ) -> tuple[Ask, Callable[[Sequence[Mapping[str, Any]]], None]]:
        """The comparisons ``pairs[g]`` of each group, as items whose answers are in a fixed order.

        The lesser text comes first: a pair asked again, in either order, is the same item.
        """
        share = self.share
        assert share is not None
        items: dict[str, Item] = {}
        ids: list[tuple[GroupState, int, int, str, bool]] = []
        for s in states:
            texts = s.group.completions
            for a, b in pairs.get(s.index, []):
                ta, tb = texts[a], texts[b]
                if ta == tb:  # identical answers: a tie, asked of no judge
                    s.compared[a, b] = PairRead(
                        0.5, None, "identical answers: a tie, not judged", judged=False
                    )
                    continue
                first, second = (ta, tb) if ta < tb else (tb, ta)
                ident = "pair-" + digest(dict(s.group.fields), first, second)
                ids.append((s, a, b, ident, ta == first))
                if ident not in items:
                    s.asked += self.rubric.judge_calls
                    items[ident] = _item(ident, s.group.fields, response_a=first, response_b=second)

        def read(records: Sequence[Mapping[str, Any]]) -> None:
            by_id = {str(r["id"]): r for r in records}
            for s, a, b, ident, a_first in ids:
                record = by_id[ident]
                reading = share.read(record)
                flips = list(VerdictRecord.from_record(record).inconsistent)
                if reading.value is None:
                    s.compared[a, b] = PairRead(None, reading.used, reading.why, flips)
                else:
                    value = reading.value if a_first else 1.0 - reading.value
                    s.compared[a, b] = PairRead(value, reading.used, reading.note or None, flips)

        return Ask(self.rubric, list(items.values())), read

    def _listwise_ask(
        self, states: list[GroupState]
    ) -> tuple[AskEach, Callable[[tuple[str, Sequence[Any]]], None]]:
        """One listwise call per judge and group (all groups of one size: one rubric)."""
        judges = len(self.jury.judges)
        items: list[Item] = []
        orders: dict[tuple[int, int], list[int]] = {}
        for s in states:
            s.asked += 1
            group_id = digest(s.group.key, dict(s.group.fields), list(s.group.completions))
            for j in range(judges):
                order = [int(x) for x in s.rng.permutation(s.k)]
                orders[s.index, j] = order
                answers = "\n\n".join(
                    f"Answer {LETTERS[p]}:\n{s.group.completions[c]}" for p, c in enumerate(order)
                )
                ident = f"list-{group_id}-{j}"
                items.append(_item(ident, s.group.fields, answers=answers))

        def read(answer: tuple[str, Sequence[Any]]) -> None:
            self._read_listwise(states, orders, answer)

        return AskEach(listwise_rubric(self.rubric, states[0].k), items, judges), read

    def _read_listwise(
        self,
        states: list[GroupState],
        orders: Mapping[tuple[int, int], list[int]],
        answer: tuple[str, Sequence[Any]],
    ) -> None:
        from .judging import decide

        listed = self.listed
        assert listed is not None
        prov, votes = answer
        names = [c.name for c in self.rubric.criteria]
        scales = {c.name: c.scale for c in self.rubric.criteria}
        for g, s in enumerate(states):
            mine: list[list[Vote]] = [[] for _ in range(s.k)]
            s.position = [[] for _ in range(s.k)]
            for j, judge in enumerate(self.jury.judges):
                order = orders[s.index, j]
                by_name = {v.criterion: v for v in votes[j][g]}
                for name in names:
                    values: list[tuple[int, float]] = []
                    for p, c in enumerate(order):
                        vote = by_name.get(f"{LETTERS[p].lower()}_{name}")
                        if vote is None:
                            vote = Vote(
                                judge=judge.name, criterion=name, error="no vote for its letter"
                            )
                        mine[c].append(vote.model_copy(update={"criterion": name}))
                        if vote.score is not None:
                            scale = scales[name]
                            values.append((p, (vote.score - scale.low) / (scale.high - scale.low)))
                    if len(values) > 1:
                        mean = sum(v for _, v in values) / len(values)
                        for p, v in values:
                            s.position[p].append(v - mean)
            for c in range(s.k):
                verdict = decide(self.rubric, self.jury, prov, f"{s.group.key}#{c}", mine[c])
                s.listed[c] = listed.read(verdict.verdict_record())

    def _anchor(self, s: GroupState) -> int | None:
        """The completion of median pointwise reward (the lower of the middle two).

        Ties go by position; None when none has one.
        """
        known = sorted(
            (r.value, c) for c, r in enumerate(s.pointwise) if r is not None and r.value is not None
        )
        return known[(len(known) - 1) // 2][1] if known else None


def drive(job: GroupJob, answer: Callable[[list[Ask | AskEach]], list[Any]]) -> list[GroupResult]:
    """Run ``job`` to its results, ``answer`` judging each list of asks."""
    steps = job.run()
    try:
        asks = next(steps)
        while True:
            asks = steps.send(answer(asks))
    except StopIteration as done:
        return list(done.value)


def judge_groups(jury: Any, job: GroupJob) -> list[GroupResult]:
    """``job`` judged by an in-process `jurybox.judges.Jury`, its verdict cache on if it has one.

    Each `Ask` goes through ``jury.score_records``, each `AskEach` through each judge's own
    backend.
    """
    from .judging import judge_votes, render_requests

    def answer(asks: list[Ask | AskEach]) -> list[Any]:
        out: list[Any] = []
        for ask in asks:
            if isinstance(ask, Ask):
                out.append(jury.score_records(ask.rubric, ask.items) if ask.items else [])
                continue
            requests = render_requests(ask.rubric, ask.items)
            n = len(ask.items) // ask.judges
            votes = [
                judge_votes(
                    judge,
                    jury.backend(judge),
                    requests.subset([g * ask.judges + j for g in range(n)]),
                )
                for j, judge in enumerate(jury.spec.judges)
            ]
            out.append((jury.provenance(ask.rubric), votes))
        return out

    return drive(job, answer)
