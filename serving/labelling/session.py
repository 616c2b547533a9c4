"""A labelling session without HTTP, one method per route of the page's API.

The session holds the judged items, the rubric, the labels file and the order items are offered
in; what each route of the page's API (`.app`) answers is one method here. A request it
refuses is a problem named by its class (`Invalid`, `NotFound`: ``serving/problems.py`` says
which status each one is) naming the field at fault, and nothing is written for it.

A checklist rubric judged point by point (``checklist: {score: points}``) is labelled point by
point: an item's criteria are its own points (``p1``, ``p2`` ..., each with its text, points,
tag and, where the judges are shown, the jury's met), each on the rubric's yes/no scale, and a
label line holds the ``pK`` columns `jurybox.calibration.data.points` reads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jurybox.calibration.data.label_store import LabelStore
from jurybox.calibration.estimates.active import pool_model
from jurybox.calibration.estimates.selection import Choice, Selector, labelled, progress
from jurybox.rubrics import Item, Rubric, VerdictRecord
from jurybox.serving.errors import Invalid, NotFound


class LabellingSession:
    """Judged items, the rubric, the labels file and the order items are offered in.

    Args:
        items: The judged items by id.
        verdicts: The jury's verdict on each item, by id.
        rubric: The rubric the items were judged with (its criteria are labelled).
        store: The labels file, appended to.
        selector: Which item each rater is offered next, and the labelling goal.
        target_width: The width of the estimates' intervals at which labelling may stop.
        show_judges: Whether the next item comes with the judges' votes (by default they are
            shown only after the rater's label is saved).
        sequence: The benchmark mean's confidence sequence, for the progress.
    """

    def __init__(
        self,
        items: Mapping[str, Item],
        verdicts: Mapping[str, VerdictRecord],
        rubric: Rubric,
        store: LabelStore,
        selector: Selector,
        *,
        target_width: float | None = None,
        show_judges: bool = False,
        sequence: str = "asymptotic",
    ) -> None:
        self.items, self.verdicts, self.rubric = dict(items), dict(verdicts), rubric
        self.store, self.selector = store, selector
        self.target_width, self.show_judges = target_width, show_judges
        self.sequence = sequence  # the benchmark mean's confidence sequence (progress)
        # Point by point: each item's criteria are its checklist's points, on met's scale; the
        # progress has no per-criterion estimate (a pK is another point on every item).
        self.by_point = rubric.checklist is not None and rubric.checklist.score == "points"
        self.scales = {} if self.by_point else {c.name: c.scale for c in rubric.criteria}
        # The jury's predictive distributions: the benchmark mean's variance floor.
        self.model = pool_model(list(self.verdicts.values()), self.scales)
        self._offered: dict[str, Choice] = {}  # per rater: the item last offered, and why
        self._lock = threading.Lock()

    # -- what the routes answer ----------------------------------------------------------------

    def next(self, rater: str) -> dict[str, Any] | None:
        """The next item for ``rater``, or None when the goal is met or nothing is left."""
        rater = _rater(rater)
        with self._lock:
            now = self.progress()
            if now["goal_met"]:
                return None
            choice = self.selector.next(rater, self.store.latest())
            if choice is None:
                return None
            self._offered[rater] = choice
        item = self.items[choice.id]
        out = {
            "id": item.id,
            "fields": {
                k: v
                for k, v in item.fields().items()
                if k != "images"
                and not (self.by_point and k == "checklist")  # its points are the criteria
                and v not in (None, "", [])
            },
            "images": list(item.images),
            "criteria": self.criteria(item.id),
            "why": choice.why,
            "progress": now,
            "rubric": self.rubric.name,
        }
        if self.show_judges:
            out["judges"] = self.judges(item.id)
        return out

    def save(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Save a rater's labels for an item.

        Args:
            body: The request's body: ``{"id", "rater", "labels": {criterion: value}}``.

        Returns:
            The line saved, the judges' votes on the item (with where the jury disagrees with
                the rater) and the progress.

        Raises:
            NotFound: For an unknown id.
            Invalid: For no id, an unknown criterion, a value off its scale, a missing rater,
                or no label at all.
        """
        item, rater = self._item(body), _rater(body.get("rater"))
        raw = body.get("labels")
        if not isinstance(raw, dict) or not raw:
            raise Invalid(
                "labels must be an object with a value per criterion, e.g. "
                f'{{"{self.rubric.criteria[0].name}": ...}}',
                "labels",
            )
        scales = self._scales(item)
        values: dict[str, float | None] = {}
        for criterion, value in raw.items():
            if criterion not in scales:
                known = (
                    f"item {item!r} has the points {list(scales)}"
                    if self.by_point
                    else f"the rubric {self.rubric.name} has {list(scales)}"
                )
                raise Invalid(f"unknown criterion {criterion!r}; {known}", f"labels.{criterion}")
            if value is None:
                values[criterion] = None
                continue
            try:
                values[criterion] = scales[criterion].parse(value)
            except ValueError as exc:
                raise Invalid(str(exc), f"labels.{criterion}") from None
        if all(v is None for v in values.values()):
            raise Invalid("no criterion has a value; skip the item instead", "labels")
        with self._lock:
            line = self.store.append(
                {"id": item, "rater": rater, **values, "selection": self._selection(rater, item)}
            )
            now = self.progress()
        return {"saved": line, "judges": self.judges(item, values), "progress": now}

    def skip(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Skip an item for a rater, with a reason; it is not offered to the rater again."""
        item, rater = self._item(body), _rater(body.get("rater"))
        reason = body.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise Invalid("say why the item is skipped (reason)", "reason")
        with self._lock:
            line = self.store.append(
                {
                    "id": item,
                    "rater": rater,
                    "skipped": reason.strip(),
                    "selection": self._selection(rater, item),
                }
            )
            return {"skipped": line, "progress": self.progress()}

    def undo(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Withdraw the rater's latest label: the item is offered to the rater again.

        Args:
            body: The request's body: ``{"rater"}``.

        Returns:
            The id whose label was withdrawn and the progress.

        Raises:
            NotFound: When the rater has no label to undo.
            Invalid: Without a rater.
        """
        rater = _rater(body.get("rater"))
        with self._lock:
            latest = self.store.latest()
            mine = [
                line
                for line in self.store.lines
                if str(line.get("rater")) == rater
                and latest[(str(line["id"]), rater)] is line
                and labelled(line)
            ]
            if not mine:
                raise NotFound(f"rater {rater!r} has no label to undo", "rater")
            last = mine[-1]
            self.store.append({"id": last["id"], "rater": rater, "undone": True})
            return {"undone": last["id"], "progress": self.progress()}

    def progress(self) -> dict[str, Any]:
        """GET /api/progress (see `jurybox.calibration.estimates.selection.progress`)."""
        scores = {i: v.scores for i, v in self.verdicts.items()}
        out = progress(
            self.store.latest(),
            scores,
            self.scales,
            self.target_width,
            len(self.selector.order),
            self.selector.goal,
            model=self.model,
            probabilities=self.selector.probability,
            sequence=self.sequence,
        )
        out["goal"] = self.selector.goal
        return out

    # -- pieces --------------------------------------------------------------------------------

    def criteria(self, item: str | None = None) -> list[dict[str, Any]]:
        """Every criterion with its scale's points (value, label, level description).

        Point by point, ``item``'s checklist points: each a criterion named by its key, its
        text the description, and under ``point`` its points, tag, whether it is a pitfall and
        (where the judges are shown) the jury's met.
        """
        if self.by_point and item is not None:
            met = self.rubric.criteria[0].scale
            verdict = self.verdicts[item]
            out = []
            for key, point in (verdict.points or {}).items():
                shown: dict[str, Any] = {
                    "points": point.points,
                    "tag": point.tag,
                    "pitfall": point.points < 0,
                }
                if self.show_judges:
                    shown["jury_met"] = point.met
                out.append(
                    {
                        "name": key,
                        "description": point.text,
                        "point": shown,
                        "points": [
                            {"value": p.value, "label": p.label, "description": p.description}
                            for p in met.points
                        ],
                    }
                )
            return out
        return [
            {
                "name": c.name,
                "description": c.description,
                "points": [
                    {"value": p.value, "label": p.label, "description": p.description}
                    for p in c.scale.points
                ],
            }
            for c in self.rubric.criteria
        ]

    def judges(self, item: str, human: Mapping[str, float | None] | None = None) -> dict[str, Any]:
        """The jury's score and each judge's vote per criterion on ``item``.

        Each criterion also says whether the jury disagrees with ``human`` (the rater's
        labels).
        """
        verdict = self.verdicts[item]
        out: dict[str, Any] = {}
        for criterion, scale in self._scales(item).items():
            score = verdict.scores.get(criterion)
            jury = None if score is None else float(scale.snap(score))
            mine = None if human is None else human.get(criterion)
            if self.by_point:  # a point's met as the jury has it: a mean of yes and no lies between
                shown = score
                disagrees = mine is not None and score is not None and abs(score - mine) >= 0.5
            else:
                shown, disagrees = jury, mine is not None and jury is not None and jury != mine
            out[criterion] = {
                "jury": shown,
                "votes": {v.judge: v.score for v in verdict.votes if v.criterion == criterion},
                "disagrees": disagrees,
            }
        return out

    def image(self, item: str, n: int) -> Path:
        """The local file of image ``n`` of ``item`` (only files the judged items name)."""
        images = self._item({"id": item}) and self.items[item].images
        if not 0 <= n < len(images) or images[n].startswith(("http:", "https:", "data:")):
            raise NotFound(f"item {item!r} has no local image {n}", "n")
        path = Path(images[n])
        if not path.is_file():
            raise NotFound(f"image {n} of item {item!r} ({path}) is not a file here", "n")
        return path

    def _scales(self, item: str) -> dict[str, Any]:
        """The scale of each criterion labelled on ``item`` (point by point: its points')."""
        if not self.by_point:
            return self.scales
        met = self.rubric.criteria[0].scale
        return dict.fromkeys(self.verdicts[item].points or {}, met)

    def _item(self, body: Mapping[str, Any]) -> str:
        item = body.get("id")
        if not isinstance(item, (str, int)) or str(item) not in self.items:
            if item is None:
                raise Invalid("id is missing", "id")
            raise NotFound(f"unknown item id {item!r}: not among the judged items", "id")
        return str(item)

    def _selection(self, rater: str, item: str) -> dict[str, Any]:
        offered = self._offered.get(rater)
        if offered is not None and offered.id == item:
            return offered.selection
        return {"strategy": "chosen by the client", "probability": None}


def _rater(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("rater is missing: every label carries who gave it", "rater")
    return value.strip()
