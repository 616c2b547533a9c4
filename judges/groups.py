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
"""

from __future__ import annotations

import hashlib
import json
import math
import string
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from jurybox.rubrics import Criterion, Item, Rubric, VerdictRecord, Vote
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec

from . import rankings
from .rankings import Relative
from .resolution import Reading, ResolvedReward, Use
from .spec import JurySpec

Design = Literal["pointwise", "round_robin", "regular", "swiss", "anchor", "listwise"]
#: The designs that compare completions in pairs (on a pairwise rubric).
COMPARING: tuple[Design, ...] = ("round_robin", "regular", "swiss", "anchor")
#: Most completions a listwise prompt shows (one letter each).
LETTERS = string.ascii_uppercase


class GroupSpec(BaseModel):
    """How a group of completions is judged and what its rewards are.

    See the module docstring.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    design: Design = Field(
        "round_robin", description="pointwise, round_robin, regular, swiss, anchor or listwise."
    )
    per_completion: int = Field(
        3,
        ge=1,
        le=64,
        description="regular and swiss: comparisons "
        "per completion (Swiss rounds); at least the group's size "
        "minus one is the round robin.",
    )
    relative: Relative = Field(
        "bradley_terry",
        description="The comparisons' term: "
        "bradley_terry (the completion's Bradley-Terry probability of "
        "beating a groupmate drawn at random) or win_share (its mean "
        "share, ties half).",
    )
    low: float = Field(
        0.0,
        description="The group term's value for the worst completion "
        "possible (its [0, 1] mapped onto [low, high]).",
    )
    high: float = Field(1.0, description="The group term's value for the best.")
    centred: bool = Field(False, description="Subtract the group's mean from the group term.")
    weight: float | None = Field(
        None,
        description="Mixed: the reward is the pointwise reward "
        "plus weight x the group term (a pointwise rubric needed); "
        "None: the group term alone.",
    )
    use: Use = Field(
        "expected",
        description="Read verdicts from the judges' expected scores "
        "where every scored vote has a distribution (else their chosen scores, "
        "said per completion), or from their chosen scores (score).",
    )
    prior: float = Field(
        1.0,
        gt=0.0,
        le=1000.0,
        description="bradley_terry: virtual tie games "
        "per completion, spread over its groupmates (the estimate exists for "
        "any outcome; a larger prior pulls strengths together).",
    )
    seed: int = Field(
        0,
        ge=0,
        le=2**63 - 1,
        description="Seeds the random designs, Swiss pairings and listwise "
        "orders, with each group's content (the same group, the same calls).",
    )

    @model_validator(mode="after")
    def _sensible(self) -> GroupSpec:
        if not math.isfinite(self.low) or not math.isfinite(self.high) or self.high <= self.low:
            raise ValueError(
                f"the group term's range [{self.low}, {self.high}] must be finite "
                "and high above low"
            )
        if not math.isfinite(self.high - self.low):
            raise ValueError(
                f"the group term's range [{self.low}, {self.high}] is wider than a float "
                "holds: high - low must be a finite number"
            )
        if self.weight is not None and not math.isfinite(self.weight * (self.high - self.low)):
            raise ValueError(
                "weight must be a finite number (or None), and weight times the group "
                "term's range too"
            )
        if self.weight is not None and self.design == "pointwise":
            raise ValueError(
                "weight mixes the pointwise reward with a group term; the "
                "pointwise design has none (give another design, or no weight)"
            )
        return self

    def check(self, rubric: Rubric, pointwise: Rubric | None) -> None:
        """Refuse a ``rubric`` (the design's) or ``pointwise`` rubric that does not fit.

        The pointwise rubric is for the anchor, a mixed reward and groups of one.

        Raises:
            InputError: A rubric does not fit the design (naming the field).
        """
        if self.design in COMPARING and not rubric.pairwise:
            raise InputError(
                f"the {self.design} design compares completions in pairs: it needs "
                f"a pairwise rubric (mode: pairwise, e.g. pairwise or "
                f"general-pairwise); {rubric.name} is not one",
                field="rubric",
            )
        if self.design not in COMPARING and rubric.pairwise:
            raise InputError(
                f"the {self.design} design scores each completion: it needs a "
                f"pointwise rubric; {rubric.name} is pairwise (give a comparing "
                "design: round_robin, regular, swiss or anchor)",
                field="rubric",
            )
        if pointwise is not None and pointwise.pairwise:
            raise InputError(
                f"the pointwise rubric {pointwise.name} is pairwise; give one that "
                "scores a single response",
                field="pointwise",
            )
        if pointwise is None and self.design == "anchor":
            raise InputError(
                "the anchor design compares every completion with the one of "
                "median pointwise score: give the pointwise rubric that scores "
                "them",
                field="pointwise",
            )
        if pointwise is None and self.weight is not None:
            raise InputError(
                "a mixed reward (weight) adds the pointwise reward: give the pointwise rubric",
                field="pointwise",
            )

    def cost(self, k: int, rubric: Rubric, pointwise: Rubric | None = None) -> GroupCost:
        """The judge calls (each judge's) one group of ``k`` completions takes.

        These are at most, as identical completions are a tie without a call.
        """
        scorer = (
            pointwise
            if pointwise is not None
            else (rubric if self.design in ("pointwise", "listwise") else None)
        )
        if k == 1:
            return GroupCost(
                "pointwise",
                1,
                0,
                scorer.judge_calls if scorer else 0,
                0,
                "one completion: rewarded pointwise",
            )
        r = min(self.per_completion, k - 1)
        pairs = {
            "round_robin": k * (k - 1) // 2,
            "regular": k * (k - 1) // 2 if r >= k - 1 else k * r // 2,
            "swiss": r * (k // 2),
            "anchor": k - 1,
        }.get(self.design, 0)
        point = 0
        if self.design in ("pointwise", "anchor") or self.weight is not None:
            assert scorer is not None  # (check: these need one)
            point = k * scorer.judge_calls
        compare = pairs * rubric.judge_calls
        listwise = 1 if self.design == "listwise" else 0
        return GroupCost(
            self.design,
            k,
            pairs,
            point,
            compare + listwise,
            self._words(k, r, pairs, rubric, point, compare, listwise),
        )

    def _words(
        self, k: int, r: int, pairs: int, rubric: Rubric, point: int, compare: int, listwise: int
    ) -> str:
        per = rubric.judge_calls
        plural = "pair" if pairs == 1 else "pairs"
        orders = (
            f"{pairs} {plural} x {per} calls (both orders)"
            if per == 2
            else f"{pairs} {plural} x {per} calls ({per // 2} per order)"
        )
        design = {
            "round_robin": f"round robin: {orders}",
            "regular": f"{r}-regular design: {orders}",
            "swiss": f"{r} Swiss rounds: {orders}",
            "anchor": f"against the median's anchor: {orders}",
            "listwise": "listwise: the whole group in one call",
            "pointwise": "",
        }[self.design]
        parts = [
            p for p in (design, f"{point} pointwise calls ({k} completions)" if point else "") if p
        ]
        total = point + compare + listwise
        return f"{total} judge calls per judge per group of {k} ({'; '.join(parts)})"


@dataclass(frozen=True)
class GroupCost:
    """What one group costs.

    That is the design used, its size, the pairs it compares, the pointwise calls and the group
    design's calls (each judge's), and the same in words.
    """

    design: str
    k: int
    pairs: int
    pointwise_calls: int
    group_calls: int
    words: str

    @property
    def calls(self) -> int:
        """Every judge call the group takes, per judge."""
        return self.pointwise_calls + self.group_calls


# -- inputs and results ------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """One prompt's completions.

    ``fields`` are the item fields they share (question, reference, context, and any the rubrics
    use), ``completions`` the responses; ``key`` names the group in ids and logs.
    """

    key: str
    fields: Mapping[str, Any]
    completions: Sequence[str]


class Comparison(BaseModel):
    """One comparison behind a completion's reward, from that completion's side."""

    other: int = Field(description="The other completion's position in the group.")
    share: float | None = Field(
        description="This completion's share of the win: 1 better, 0 "
        "worse, 0.5 a tie (a graded or expected share between); null "
        "when unscored."
    )
    winner: Literal["this", "other", "tie"] | None = Field(
        None, description="Which answer the jury found better (null when unscored)."
    )
    used: Use | None = Field(None, description="expected or score: what the share was read from.")
    reason: str | None = Field(
        None,
        description="Why the comparison is unscored, or why its "
        "chosen scores stood where expected ones were asked for.",
    )
    inconsistent: list[str] = Field(
        default_factory=list,
        description="Judges whose two orders pointed to different answers (counted as a tie).",
    )
    judged: bool = Field(True, description="False for identical answers: a tie, not asked.")


class CompletionReward(BaseModel):
    """One completion's reward and what it came from."""

    reward: float | None = Field(description="The reward (null when it has none: see reason).")
    reason: str | None = Field(None, description="Why it has no reward.")
    pointwise: float | None = Field(
        None, description="Its pointwise reward, where the design asked for one."
    )
    term: float | None = Field(
        None,
        description="The group term: relative value, listwise "
        "score or pointwise score on [low, high], centred as asked.",
    )
    strength: float | None = Field(
        None, description="Bradley-Terry log-strength (mean 0 in the group)."
    )
    win_share: float | None = Field(
        None, description="Mean share over its scored comparisons (ties half)."
    )
    used: Use | None = Field(
        None,
        description="expected when every verdict behind it was read "
        "from expected scores, else score.",
    )
    note: str | None = Field(
        None, description="Why chosen scores stood where expected ones were asked for."
    )
    comparisons: list[Comparison] = Field(default_factory=list)


class GroupResult(BaseModel):
    """The rewards of one group's completions, in order, with what each came from."""

    id: str = Field(description="The group's id.")
    design: Design = Field(description="The design used (pointwise for a group of one).")
    rewards: list[float | None] = Field(description="One reward per completion, in order.")
    completions: list[CompletionReward]
    calls: int = Field(description="Judge calls per judge the design plans for the group.")
    asked: int = Field(
        description="Judge calls per judge actually asked (identical answers "
        "and repeated items are not asked twice; cached ones count)."
    )
    fallback: str | None = Field(
        None,
        description="Why the group was judged otherwise than asked (a group of one: pointwise).",
    )
    position_effect: list[float | None] | None = Field(
        None,
        description="Listwise: per position shown (first letter first), the mean score "
        "there minus the call's mean (on [0, 1]); the shuffle makes it the position's effect.",
    )
    signal: bool | None = Field(
        None,
        description="Whether the group's spread is signal: false when its rewards all tie, or "
        "when its comparisons' spread is no larger than coin flips of the same comparisons make "
        "(null_p above 0.05); true when it is; null when the test cannot tell (too few "
        "comparisons to reach 0.05, a design without comparisons whose rewards differ, or a "
        "mixed reward whose comparisons show none: its pointwise part may). "
        "Groups with false carry no signal: drop them (as DAPO drops groups of zero spread).",
    )
    null_p: float | None = Field(
        None,
        description="Comparing designs: the share of sign flips of the comparisons (each pair's "
        "outcome a coin flip: its share s or 1 - s) whose win shares spread at least as far as "
        "the observed ones; exact up to 2^12 flips, else a seeded simulation of 4095.",
    )

    @property
    def unscored(self) -> list[tuple[int, str]]:
        """The completions without a reward and why."""
        return [
            (k, c.reason or "no reward") for k, c in enumerate(self.completions) if c.reward is None
        ]

    @property
    def spread(self) -> float | None:
        """The rewards' standard deviation (None with fewer than two rewards)."""
        known = [r for r in self.rewards if r is not None]
        return float(np.std(known)) if len(known) > 1 else None


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


def _item(ident: str, fields: Mapping[str, Any], **more: Any) -> Item:
    core = {k: fields[k] for k in _CORE if fields.get(k) is not None}
    extra = {k: v for k, v in fields.items() if k not in _CORE and k != "response"}
    response = more.pop("response", None)
    extra.update(more)
    return Item(id=ident, response=response, extra=extra, **core)


LISTWISE_SYSTEM = (
    " You are shown several answers to the same question, each under a letter. "
    "Judge each answer on its own merits: its letter and its position say "
    "nothing about it."
)
LISTWISE_TEMPLATE = """\
{% if context %}
Context:
{{ context }}

{% endif %}
Question:
{{ question }}

{% if reference %}
Reference answer (written by an expert, treat it as correct):
{{ reference }}

{% endif %}
The answers to judge:

{{ answers }}

Judge every answer on each criterion:
{% for c in criteria[:@N@] %}
- {{ c.description }}
  {{ c.scale.describe() }}
{% endfor %}

For each answer letter and criterion, the key is the letter (lowercase), an underscore and the \
criterion's name.
{{ output_format }}
"""


def listwise_rubric(base: Rubric, k: int) -> Rubric:
    """The rubric of a listwise call over ``k`` answers.

    It has ``base``'s criteria once per letter (``a_accuracy``, ``b_accuracy``, ...), all in one
    call, the answers in the item's ``answers`` field (lettered text).
    """
    if not 2 <= k <= len(LETTERS):
        raise InputError(
            f"a listwise call shows 2 to {len(LETTERS)} answers (one letter "
            f"each); this group has {k}",
            field="completions",
        )
    criteria = [
        Criterion(
            name=f"{letter.lower()}_{c.name}",
            description=f"{c.name}: {c.description}",
            scale=c.scale,
        )
        for letter in LETTERS[:k]
        for c in base.criteria
    ]
    others = [n for n in base.inputs if n not in ("question", "response")]
    try:
        return Rubric(
            name=f"{base.name}.listwise{k}",
            description=f"{base.name}, {k} answers at once",
            version=base.version,
            inputs=["question", "answers", *others],
            optional_inputs=[n for n in base.optional_inputs if n != "response"],
            mode="joint",
            system=(base.system + LISTWISE_SYSTEM).strip(),
            template=LISTWISE_TEMPLATE.replace("@N@", str(len(base.criteria))),
            criteria=criteria,
        )
    except ValidationError as exc:  # e.g. a system prompt that names the response
        first = exc.errors(include_url=False)[0]
        raise InputError(
            f"rubric {base.name} cannot be asked listwise: "
            f"{first['msg'].removeprefix('Value error, ')}",
            field="rubric",
        ) from None


@dataclass
class _Read:
    """A comparison read from the lower-numbered completion's side."""

    share: float | None
    used: Use | None
    reason: str | None
    inconsistent: list[str] = field(default_factory=list)
    judged: bool = True


@dataclass
class _State:
    """What is known of one group so far."""

    index: int
    group: Group
    k: int
    rng: np.random.Generator
    fallback: bool = False
    pointwise: list[Reading | None] = field(default_factory=list)
    compared: dict[tuple[int, int], _Read] = field(default_factory=dict)
    listed: list[Reading | None] = field(default_factory=list)
    position: list[list[float]] = field(default_factory=list)
    asked: int = 0


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
            _State(
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
        return [self._result(s) for s in states]

    def _asked(
        self, asks: list[tuple[Ask | AskEach, Callable[[Any], None]]]
    ) -> Generator[list[Ask | AskEach], list[Any], None]:
        answers = yield [ask for ask, _ in asks]
        for (_, read), answer in zip(asks, answers):
            read(answer)

    def _first_pairs(self, s: _State) -> list[tuple[int, int]]:
        design = self.spec.design
        if design == "round_robin":
            return rankings.round_robin(s.k)
        if design == "regular":
            return rankings.regular(s.k, self.spec.per_completion, s.rng)
        if design == "swiss":
            return rankings.swiss_round(s.k, [0.0] * s.k, set(), s.rng)
        anchor = self._anchor(s)
        return [] if anchor is None else rankings.star(s.k, anchor)

    def _standing(self, s: _State) -> list[float]:
        i, j, share = self._scored(s)
        shares = rankings.win_shares(s.k, i, j, share)
        return [0.5 if math.isnan(v) else float(v) for v in shares]

    # -- asks and their answers ----------------------------------------------------------------

    def _pointwise_ask(
        self, states: list[_State]
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
                    items[ident] = _item(ident, s.group.fields, response=text)

        def read(records: Sequence[Mapping[str, Any]]) -> None:
            by_id = {str(r["id"]): r for r in records}
            for s in states:
                for c in range(s.k):
                    s.pointwise[c] = point.read(by_id[ids[s.index, c]])

        return Ask(scorer, list(items.values())), read

    def _pair_ask(
        self, states: list[_State], pairs: Mapping[int, list[tuple[int, int]]]
    ) -> tuple[Ask, Callable[[Sequence[Mapping[str, Any]]], None]]:
        """The comparisons ``pairs[g]`` of each group, as items whose answers are in a fixed order.

        The lesser text comes first: a pair asked again, in either order, is the same item.
        """
        share = self.share
        assert share is not None
        items: dict[str, Item] = {}
        ids: list[tuple[_State, int, int, str, bool]] = []
        for s in states:
            texts = s.group.completions
            for a, b in pairs.get(s.index, []):
                ta, tb = texts[a], texts[b]
                if ta == tb:  # identical answers: a tie, asked of no judge
                    s.compared[a, b] = _Read(
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
                    s.compared[a, b] = _Read(None, reading.used, reading.why, flips)
                else:
                    value = reading.value if a_first else 1.0 - reading.value
                    s.compared[a, b] = _Read(value, reading.used, reading.note or None, flips)

        return Ask(self.rubric, list(items.values())), read

    def _listwise_ask(
        self, states: list[_State]
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
        states: list[_State],
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

    def _anchor(self, s: _State) -> int | None:
        """The completion of median pointwise reward (the lower of the middle two).

        Ties go by position; None when none has one.
        """
        known = sorted(
            (r.value, c) for c, r in enumerate(s.pointwise) if r is not None and r.value is not None
        )
        return known[(len(known) - 1) // 2][1] if known else None

    # -- results -------------------------------------------------------------------------------

    def _scored(self, s: _State) -> tuple[list[int], list[int], list[float]]:
        i, j, share = [], [], []
        for (a, b), read in s.compared.items():
            if read.share is not None:
                i.append(a)
                j.append(b)
                share.append(read.share)
        return i, j, share

    def _result(self, s: _State) -> GroupResult:
        spec = self.spec
        cost = spec.cost(s.k, self.rubric, self.pointwise_rubric)
        if s.fallback:
            reading = s.pointwise[0]
            assert reading is not None
            assert self.scorer is not None
            done = CompletionReward(
                reward=reading.value,
                reason=reading.why or None,
                pointwise=reading.value,
                used=reading.used,
                note=reading.note or None,
            )
            return GroupResult(
                id=s.group.key,
                design="pointwise",
                rewards=[reading.value],
                completions=[done],
                calls=cost.calls,
                asked=s.asked,
                fallback=f"a group of one completion is rewarded pointwise "
                f"({self.scorer.name}); nothing to compare it with",
            )
        term = np.full(s.k, np.nan)
        theta = np.full(s.k, np.nan)
        shares = np.full(s.k, np.nan)
        why: list[str | None] = [None] * s.k
        if spec.design in COMPARING:
            i, j, share = self._scored(s)
            if i:
                term, theta, shares = rankings.relative(s.k, i, j, share, spec.relative, spec.prior)
            for c in range(s.k):
                if math.isnan(term[c]):
                    mine = [r for (a, b), r in s.compared.items() if c in (a, b)]
                    why[c] = (
                        (
                            "all its comparisons unscored: "
                            + "; ".join(dict.fromkeys(r.reason or "unscored" for r in mine))
                        )
                        if mine
                        else (
                            "no comparison: "
                            + (
                                "no completion of the group has a pointwise score to choose the "
                                "anchor"
                                if spec.design == "anchor"
                                else "none asked"
                            )
                        )
                    )
        elif spec.design == "listwise":
            for c, reading in enumerate(s.listed):
                if reading is not None and reading.value is not None:
                    term[c] = reading.value
                else:
                    why[c] = reading.why if reading is not None else "not judged"
        else:  # pointwise: the term on [0, 1] whatever the reward's scale
            assert self.point is not None
            bound = self.point.reward
            for c, reading in enumerate(s.pointwise):
                if reading is not None and reading.value is not None:
                    term[c] = (
                        reading.value
                        if bound.spec.scale == "unit"
                        else ((reading.value - bound.low) / (bound.high - bound.low))
                    )
                else:
                    why[c] = reading.why if reading is not None else "not judged"
        term = rankings.scaled(term, spec.low, spec.high, spec.centred)
        completions = []
        for c in range(s.k):
            readings = self._readings(s, c)
            used: Use | None = None
            notes = [r[1] for r in readings if r[1]]
            if readings:
                used = "expected" if all(u == "expected" for u, _ in readings) else "score"
            own: float | None = None if math.isnan(term[c]) else float(term[c])
            point = s.pointwise[c]
            point_value = point.value if point is not None else None
            reward, reason = own, why[c]
            if spec.weight is not None and spec.design != "pointwise":
                if point_value is None:
                    reward, reason = (
                        None,
                        "no pointwise reward: "
                        + (point.why if point is not None else "not judged"),
                    )
                elif own is not None:
                    reward = point_value + spec.weight * own
            comparisons = [
                self._comparison(c, a, b, r)
                for (a, b), r in sorted(s.compared.items())
                if c in (a, b)
            ]
            completions.append(
                CompletionReward(
                    reward=reward,
                    reason=reason if reward is None else None,
                    pointwise=point_value,
                    term=own,
                    strength=None if math.isnan(theta[c]) else float(theta[c]),
                    win_share=None if math.isnan(shares[c]) else float(shares[c]),
                    used=used,
                    note="; ".join(dict.fromkeys(notes)) or None,
                    comparisons=comparisons,
                )
            )
        effect = None
        if spec.design == "listwise":
            effect = [float(np.mean(v)) if v else None for v in s.position]
        null_p: float | None = None
        reachable = False
        if spec.design in COMPARING:
            null_p, reachable = sign_flip_test(s.k, *self._scored(s), rng=s.rng)
        result = GroupResult(
            id=s.group.key,
            design=spec.design,
            rewards=[c.reward for c in completions],
            completions=completions,
            calls=cost.calls,
            asked=s.asked,
            position_effect=effect,
            null_p=null_p,
        )
        result.signal = _signal(result.spread, null_p, reachable)
        if result.signal is False and spec.weight is not None and (result.spread or 0) > 1e-12:
            result.signal = None  # the comparisons show none; the pointwise reward may
        return result

    def _readings(self, s: _State, c: int) -> list[tuple[Use, str]]:
        out: list[tuple[Use, str]] = []
        for reading in (s.pointwise[c], s.listed[c]):
            if reading is not None and reading.value is not None:
                out.append((reading.used, reading.note))
        for (a, b), r in s.compared.items():
            if c in (a, b) and r.share is not None and r.used is not None:
                out.append((r.used, r.reason or ""))
        return out

    @staticmethod
    def _comparison(c: int, a: int, b: int, read: _Read) -> Comparison:
        other = b if c == a else a
        share = None if read.share is None else (read.share if c == a else 1.0 - read.share)
        winner: Literal["this", "other", "tie"] | None = None
        if share is not None:
            winner = "this" if share > 0.5 + 1e-9 else "other" if share < 0.5 - 1e-9 else "tie"
        return Comparison(
            other=other,
            share=share,
            winner=winner,
            used=read.used,
            reason=read.reason,
            inconsistent=read.inconsistent,
            judged=read.judged,
        )


#: The level of the sign-flip test below which a group's spread counts as signal.
SIGNAL_ALPHA = 0.05
#: Sign flips enumerated exactly up to 2 ** EXACT_PAIRS; more comparisons are simulated.
EXACT_PAIRS = 12
#: Simulated sign flips beyond that (seeded by the group's generator).
SIMULATED_FLIPS = 4095


def sign_flip_test(
    k: int, i: Sequence[int], j: Sequence[int], share: Sequence[float], rng: np.random.Generator
) -> tuple[float | None, bool]:
    """Whether a group's comparisons spread its completions further than coin flips would.

    The null is that every comparison is a coin flip between its two answers (what a judge
    that contradicts itself under the order swap says): the share ``s`` of pair ``(i, j)`` is
    as likely as ``1 - s``. The statistic is the standard deviation of the completions' win
    shares (mean share over their comparisons); its null distribution flips the sign of each
    ``s - 0.5``, over all ``2^m`` patterns when ``m <= EXACT_PAIRS`` (exact), else over
    `SIMULATED_FLIPS` seeded draws (p counting the observed pattern once).

    Args:
        k: The group's size.
        i: Each scored comparison's first completion.
        j: Its second.
        share: The first completion's share of the win (1: it is better).
        rng: The group's generator (the simulation's seed).

    Returns:
        The p-value (None without a scored comparison) and whether the test can reach
        `SIGNAL_ALPHA` at all (the least p it can give is no larger: a round robin of fewer than
        six completions, one comparison per judge, cannot).

    >>> p, reachable = sign_flip_test(2, [0], [1], [1.0], np.random.default_rng(0))
    >>> p, reachable
    (1.0, False)
    """
    m = len(share)
    if m == 0:
        return None, False
    d = np.asarray(share, dtype=float) - 0.5
    degree = np.bincount(np.concatenate([i, j]).astype(int), minlength=k).astype(float)
    met = degree > 0
    incidence = np.zeros((m, k))
    incidence[np.arange(m), i] = 1.0 / degree[i]
    incidence[np.arange(m), j] = -1.0 / degree[j]
    exact = m <= EXACT_PAIRS
    if exact:
        signs = 1.0 - 2.0 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
        null = ((signs * d) @ incidence)[:, met].std(axis=1)
    else:  # in chunks: a large group's flips never held at once
        null = np.concatenate(
            [
                ((rng.choice([-1.0, 1.0], size=(n, m)) * d) @ incidence)[:, met].std(axis=1)
                for n in np.diff(np.r_[0:SIMULATED_FLIPS:512, SIMULATED_FLIPS])
            ]
        )
    observed = float((d @ incidence)[met].std())
    tol = 1e-12 * max(1.0, observed)
    hits = int(np.count_nonzero(null >= observed - tol))
    if exact:
        least = float(np.mean(null >= null.max() - tol))
        return hits / len(null), least <= SIGNAL_ALPHA
    return (hits + 1) / (len(null) + 1), True


def _signal(spread: float | None, null_p: float | None, reachable: bool) -> bool | None:
    if spread is not None and spread <= 1e-12:
        return False
    if null_p is None or not reachable:
        return None
    return null_p <= SIGNAL_ALPHA


def no_signal_share(results: Sequence[GroupResult]) -> float:
    """The share of groups whose spread is no signal (`GroupResult.signal` false), NaN for none.

    It counts the groups whose rewards all tie and those whose comparisons spread them no
    further than coin flips; every one of them is a group GRPO should not learn from.
    """
    return float(np.mean([r.signal is False for r in results])) if results else float("nan")


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
