"""What every adapter shares: items from a client's fields, verdicts from a jury, rewards from them.

Items from a client's fields, verdicts from a running service or an in-process jury, rewards from
verdicts (`jurybox.rubrics.reward`), and a verdict in a line for a trainer's or a harness's log
(`explain`).

`JuryRewards` is the whole of it: ``rewards(rows)`` judges a batch (split into as few requests as
the service's limits allow, sent concurrently; an in-process jury judges it in one call, its verdict
cache on) and returns one reward per row, with the count of unscored ones kept in ``stats`` and each
unscored sample logged with its cause. Every error it raises names jurybox, the sample (the label
the adapter gives it: a batch position, verl's ``extra_info.index``, Inspect's sample id) and the
cause.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import WrapperDescriptorType
from typing import TYPE_CHECKING, Any

from jurybox.rubrics import Item, Rubric, load_rubric
from jurybox.rubrics.errors import ExecutionError, InputError, InstallError, JuryboxError
from jurybox.rubrics.reward import Reward, RewardSpec, UnscoredReward, policy_text

from .checklists import COLUMN, Dropout, checklist_from, chunks

if TYPE_CHECKING:  # (jurybox.judges is imported when used: the adapters import light)
    from jurybox.judges.groups import Group, GroupResult, GroupSpec
    from jurybox.judges.resolution import Use

logger = logging.getLogger("jurybox.integrations")

#: Item fields an adapter fills from its client's fields, and the client fields it reads
#: them from when not told otherwise (``fields={"reference": "answer"}`` reads the reference
#: from a dataset column named answer).
ITEM_FIELDS = ("question", "response", "reference", "context")


def message_text(value: Any) -> str:
    """The text of a prompt or completion as clients give it.

    A string, a chat message (``{"role", "content"}``), or a conversation (its last message's text).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        content = value.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # content parts: the text ones, joined
            return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        return "" if content is None else str(content)
    if isinstance(value, Sequence) and value:
        return message_text(value[-1])
    return "" if value is None else str(value)


#: Conversation roles that instruct the policy rather than belong to the item being judged.
INSTRUCTION_ROLES = ("system", "developer")


def conversation_context(value: Any) -> str | None:
    """The turns of a conversation before its last one, as ``role: text`` lines: the context.

    Without its system (or developer) turns: those instruct the policy being trained, they are not
    part of what the judges should read as the item's context. None for a plain string, or when no
    turn is left.
    """
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) < 2:
        return None
    lines = [
        f"{m.get('role', 'user')}: {message_text(m)}"
        for m in value[:-1]
        if isinstance(m, Mapping) and m.get("role") not in INSTRUCTION_ROLES
    ]
    return "\n".join(lines) or None


def short(text: str, limit: int = 300) -> str:
    """``text`` in at most ``limit`` characters (an ellipsis where it was cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def explain(record: Mapping[str, Any]) -> str:
    """A verdict in a line: each judge's scores, then why a score is missing.

    Each judge's scores (``smollm2-135m: accuracy 3, relevance 4``, with the start of its reasoning
    where the verdict keeps one), then, where a score is missing, why: the judges' own errors first
    (a prompt over their token limit, an answer that could not be read), which is the cause, then
    the jury's reasons (below quorum), which are its consequence. Inspect's explanation, TRL's
    completions table and verl's ``reward_extra_info`` show it.
    """
    scored: dict[str, list[str]] = {}
    thoughts: dict[str, str] = {}
    voted: dict[str, set[str]] = {}
    failed: dict[tuple[str, str], list[str]] = {}
    for vote in record.get("votes") or []:
        judge, criterion = str(vote.get("judge")), str(vote.get("criterion"))
        voted.setdefault(judge, set()).add(criterion)
        if vote.get("error"):
            crits = failed.setdefault((judge, str(vote["error"])), [])
            if criterion not in crits:
                crits.append(criterion)
            continue
        value = vote.get("label") or _number(vote.get("score"))
        scored.setdefault(judge, []).append(f"{criterion} {value}")
        if vote.get("reasoning") and judge not in thoughts:
            thoughts[judge] = short(str(vote["reasoning"]), 200)
    parts = [
        f"{judge}: {', '.join(scores)}"
        + (f" (reasoning: {thoughts[judge]})" if judge in thoughts else "")
        for judge, scores in scored.items()
    ]
    why = [
        f"{judge if set(crits) == voted[judge] else judge + ' on ' + ', '.join(crits)}: {error}"
        for (judge, error), crits in failed.items()
    ]
    why += list(record.get("reasons") or [])
    if why:
        parts.append("not scored: " + "; ".join(why))
    return "; ".join(parts) or str(record.get("status", "no votes"))


def precheck_reason(record: Mapping[str, Any]) -> str | None:
    """The pre-check that kept a record's item from the judges (its first reason), or None."""
    reasons = record.get("reasons") or []
    first = reasons[0] if reasons else None
    return first if isinstance(first, str) and first.startswith("pre-check:") else None


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


class MissingRewards(UnscoredReward):
    """Samples without a reward while the reward's unscored policy is ``error``.

    Named as the adapter names them (``missing``: sample, why), with what the user can do
    (``advice``).
    """

    def __init__(self, reward: str, missing: list[tuple[str, str]], advice: str) -> None:
        shown = "; ".join(f"{sample}: {short(why)}" for sample, why in missing[:5])
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        RuntimeError.__init__(
            self,
            f"jurybox: {len(missing)} sample(s) have no {reward} reward: {shown}{more}. {advice}",
        )
        self.unscored = missing


@dataclass
class RewardStats:
    """What the adapter has done so far: rows judged, unscored rewards, requests, judge calls.

    The judge calls are the items sent times the jury's judges times the rubric's calls per item
    and judge (a cached verdict counts as asked): ``judge_calls`` for the reward's own items,
    ``canary_calls`` and ``sentinel_calls`` for the guard's (`jurybox.integrations.guard`). A
    checklist rubric's calls count its points (`jurybox.rubrics.checklist.checklist_calls`).
    ``dropout`` holds each step of rubric dropout (rate, seed, step, points kept of points:
    `jurybox.integrations.checklists.DropoutStep`), none while it is off.
    """

    rows: int = 0
    unscored: int = 0
    requests: int = 0
    judge_calls: int = 0
    canary_calls: int = 0
    sentinel_calls: int = 0
    dropout: list[dict[str, float | int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        """The counts as a dict (``rows``, ``unscored``, ``requests`` and the judge calls)."""
        return {
            "rows": self.rows,
            "unscored": self.unscored,
            "requests": self.requests,
            "judge_calls": self.judge_calls,
            "canary_calls": self.canary_calls,
            "sentinel_calls": self.sentinel_calls,
        }


class JuryRewards:
    """Rewards from a jury: a running ``jurybox serve`` or an in-process jury.

    ``reward`` (a `RewardSpec`, or its fields as keyword arguments) says which number is the reward,
    on what range, and what an unscored item becomes. `group_results` rewards groups of completions
    against each other (`jurybox.judges.groups`). ``close`` it when done.

    Args:
        rubric: The rubric, by name or file, or one loaded.
        url: A running ``jurybox serve``'s URL (give this or ``jury``).
        token: The service's token.
        token_env: The environment variable the token is read from when ``token`` is not given.
        jury: An in-process jury: a name, a jury file or a loaded `jurybox.judges.Jury` (give this
            or ``url``).
        cache: An in-process jury loaded here keeps its verdict cache on unless ``cache=False``.
        reward: The reward, a `RewardSpec` (or give its fields as keyword arguments).
        fields: Maps item fields to the client's field names (``{"reference": "answer"}``).
        concurrency: Requests sent to a service at once.
        timeout: Seconds one request to the service may take.
        use: ``"expected"`` reads the reward from the judges' expected scores where every scored
            vote has a distribution (`jurybox.judges.resolution`; each record then says which scores
            it holds: ``reward_scores``, and why the chosen ones stood: ``reward_note``);
            ``"score"``, the default, from the verdict's scores.
        checklist_column: With a checklist rubric, the column holding each row's checklist (a
            list of points or that list as a JSON string; `jurybox.integrations.checklists`).
        **reward_fields: The fields of a `RewardSpec`, instead of ``reward``.

    Raises:
        InputError: Both or neither of ``url`` and ``jury``, a token without a service, a reward
            given twice, an unknown option or field, a rubric that cannot be loaded, or a reward
            that does not fit the rubric.
        ExecutionError: The service cannot be reached or refused the token (the error says whose).
    """

    def __init__(
        self,
        rubric: str | Rubric,
        *,
        url: str | None = None,
        token: str | None = None,
        token_env: str = "JURYBOX_TOKEN",
        jury: Any = None,
        cache: bool = True,
        reward: RewardSpec | None = None,
        fields: Mapping[str, str] | None = None,
        concurrency: int = 4,
        timeout: float = 900.0,
        use: Use = "score",
        checklist_column: str = COLUMN,
        **reward_fields: Any,
    ) -> None:
        if (url is None) == (jury is None):
            raise InputError(
                "jurybox: give the jury as url= (a running jurybox serve) or jury= "
                "(a jury name, file or loaded Jury), one of the two",
                field="url",
            )
        if token is not None and url is None:
            raise InputError(
                "jurybox: token= is the service's token; an in-process jury (jury=) takes none",
                field="token",
            )
        if reward is not None and reward_fields:
            raise InputError(
                "jurybox: give the reward as reward=RewardSpec(...) or as its "
                f"fields ({', '.join(reward_fields)}), not both",
                field="reward",
            )
        unknown = sorted(set(reward_fields) - set(RewardSpec.model_fields))
        if unknown:
            raise InputError(
                f"jurybox: unknown option {unknown[0]!r} (the reward's fields: "
                f"{', '.join(RewardSpec.model_fields)})",
                field=unknown[0],
            )
        self.spec = reward if reward is not None else RewardSpec(**reward_fields)
        unknown = sorted(set(fields or {}) - set(ITEM_FIELDS))
        if unknown:
            raise InputError(
                f"jurybox: fields maps item fields {ITEM_FIELDS}; {unknown} is not one",
                field="fields",
            )
        self.fields = dict(fields or {})
        self.rubric = load_rubric(rubric) if isinstance(rubric, str) else rubric
        #: Other rubrics the items are judged with (a group reward's pointwise rubric): their
        #: inputs are checked too (`make_item`).
        self.also: tuple[Rubric, ...] = ()
        self.reward: Reward = self.spec.bind(self.rubric)
        self.stats = RewardStats()
        self.checklist_column = checklist_column
        #: Rubric dropout (the reward's ``dropout`` and ``dropout_seed``; off at 0).
        self.dropout = Dropout(self.spec.dropout, self.spec.dropout_seed)
        self.concurrency = max(1, concurrency)
        self._lock = threading.Lock()
        self.url = url
        self._client: Any = None  # the service's Client, with url
        if url is not None:
            from jurybox.serving.service.client import Client, RemoteJury

            if token is None and token_env:
                token = os.environ.get(token_env)
            self._client = Client(url, token=token, timeout=timeout)
            try:
                self._jury: Any = RemoteJury(self._client)
            except JuryboxError as exc:  # unreachable, or the token refused: say whose
                self._client.close()
                raise _naming(
                    exc,
                    [],
                    f"jurybox could not start the rewards ({url}, "
                    f"token {'given' if token else 'none'})",
                ) from exc
            self._per_request = max(
                1, min(self._jury.max_items, self._jury.max_judge_calls // self.rubric.judge_calls)
            )
        else:
            from jurybox.judges import Jury

            if isinstance(jury, (str, os.PathLike)):
                cached = None
                from jurybox.judges import cache as verdict_cache

                if cache and verdict_cache.enabled():  # (JURYBOX_VERDICT_CACHE=off: none)
                    cached = verdict_cache.VerdictCache()
                jury = Jury.load(os.fspath(jury), cache=cached)
                try:
                    _local_models(jury.spec.judges)
                except InstallError:
                    jury.close()
                    raise
            else:
                _local_models(jury.spec.judges)
            self._jury = jury
            self._per_request = 0
        self._pool: ThreadPoolExecutor | None = None
        from jurybox.judges.resolution import ResolvedReward

        try:
            self.resolved = ResolvedReward.bind(self.spec, self.rubric, self._jury.spec, use)
        except InputError:
            self.close()
            raise
        self._pool = (
            ThreadPoolExecutor(self.concurrency, thread_name_prefix="jurybox-reward")
            if self.concurrency > 1
            else None
        )
        #: The guard around each batch (`jurybox.integrations.guard.RewardGuard`, which sets it).
        self.guard: Any = None

    def floored(self, records: Sequence[Mapping[str, Any]]) -> set[int]:
        """The positions of records pre-checked by the guard whose reward is its floor.

        Those whose reward is the guard's number ``precheck_reward``; none without a guard or
        with ``precheck_reward="unscored"`` (the unscored policy stands there, the pre-check its
        reason).
        """
        guard = getattr(self, "guard", None)
        if guard is None or isinstance(guard.spec.precheck_reward, str):
            return set()
        return {k for k, record in enumerate(records) if precheck_reason(record) is not None}

    def values_of(
        self, records: Sequence[Mapping[str, Any]], reward: Reward | None = None
    ) -> list[float | None]:
        """The rewards of ``records``: the unscored policy applied, and the guard's floor.

        ``reward`` (by default this one's) with its unscored policy; the guard's
        ``precheck_reward`` where it is a number and the record was pre-checked.

        Args:
            records: Verdict records.
            reward: The reward (default this one's).

        Returns:
            One reward per record.

        Raises:
            UnscoredReward: The reward's unscored policy is ``error`` and a record has no reward.
        """
        bound = reward if reward is not None else self.reward
        floored = self.floored(records)
        if not floored:
            return bound.values(records)
        floor = float(self.guard.spec.precheck_reward)
        rest = iter(bound.values([r for k, r in enumerate(records) if k not in floored]))
        return [floor if k in floored else next(rest) for k in range(len(records))]

    # -- items ----------------------------------------------------------------------------------

    def item(self, index: int, row: Mapping[str, Any], sample: str | None = None) -> Item:
        """The item a client's row holds.

        ``question`` from its prompt (a conversation's last turn; the turns before, but its system
        turns, as ``context``), ``response`` from its completion, the others from the columns
        ``fields`` names (by default the item field's own name).

        Args:
            index: The row's position, the item's id.
            row: The client's fields.
            sample: Names the row in errors (default: ``row <index>``).

        Returns:
            The item.

        Raises:
            InputError: The question or reference the rubric needs is missing or empty, naming
                jurybox, the sample and the column.
        """
        prompt = row.get(self.fields.get("question", "prompt"), row.get("question"))
        completion = row.get(self.fields.get("response", "completion"), row.get("response"))
        values: dict[str, Any] = {
            "question": message_text(prompt),
            "response": message_text(completion),
        }
        context_key = self.fields.get("context", "context")
        context = row.get(context_key) if context_key in row else conversation_context(prompt)
        if context is not None:
            values["context"] = message_text(context)
        ref_key = self.fields.get("reference", "reference")
        if ref_key in row and row[ref_key] is not None:
            values["reference"] = message_text(row[ref_key])
        values["checklist"] = checklist_from(
            self.rubric,
            row,
            self.checklist_column,
            sample or f"row {index}",
            f"column {self.checklist_column!r}",
            "name another with checklist_column=",
        )
        where = {
            name: f"column {key!r} (name another with fields={{{name!r}: COLUMN}})"
            for name, key in (
                ("question", self.fields.get("question", "prompt")),
                ("reference", ref_key),
            )
        }
        return self.make_item(index, values, sample or f"row {index}", where)

    def make_item(
        self, ident: int | str, values: Mapping[str, Any], sample: str, where: Mapping[str, str]
    ) -> Item:
        """An item of ``values`` (item fields), its id ``ident``.

        An empty response is judged: a policy that answered nothing gets the jury's verdict on that.
        A lone surrogate in a field is replaced by U+FFFD (`jurybox.rubrics.reward.policy_text`),
        with a warning naming the sample and the field.

        Args:
            ident: The item's id.
            values: The item's fields.
            sample: Names the sample in errors.
            where: Item field -> a phrase saying where the client gives it, for errors.

        Returns:
            The item.

        Raises:
            InputError: The question or reference the rubric needs is missing or empty, naming
                jurybox, ``sample`` and where the client gives the field.
        """
        for rubric in (self.rubric, *self.also):
            for name in ("question", "reference"):
                if name in rubric.inputs and not values.get(name):
                    got = "missing" if values.get(name) is None else "empty"
                    raise InputError(
                        f"jurybox: {sample}: rubric {rubric.name} needs the "
                        f"{name}, and it is {got}: {where.get(name, name)}",
                        field=name,
                    )
        fields = {k: v for k, v in values.items() if v is not None}
        for name, value in fields.items():
            if isinstance(value, str):
                fields[name], replaced = policy_text(value)
                if replaced:
                    logger.warning(
                        "jurybox: %s: its %s holds %d lone surrogate(s), not Unicode text: "
                        "each replaced by U+FFFD before judging",
                        sample,
                        name,
                        replaced,
                    )
        return Item(id=str(ident), **fields)

    # -- judging --------------------------------------------------------------------------------

    def records(
        self,
        items: Sequence[Item],
        samples: Sequence[str] | None = None,
        step: int | None = None,
    ) -> list[dict[str, Any]]:
        """The verdict records of ``items``, in order (several requests at once to a service).

        With rubric dropout on (the reward's ``dropout``), each item is judged on its prompt's
        subset of points for ``step`` (`jurybox.integrations.checklists.Dropout`), the step
        logged and kept in ``stats.dropout``.

        Args:
            items: The items to judge (not changed).
            samples: One label per item, for errors (default ``row <k>``).
            step: The training step, for dropout (default: this reward's count of batches).

        Returns:
            One verdict record per item, in order.

        Raises:
            InputError: An item the rubric cannot judge, or a request the service refused, naming
                jurybox and the sample at fault where the service says which.
            ExecutionError: The jury or the service could not judge (a judge that failed, a service
                that could not answer), naming jurybox and the samples.
        """
        if not items:
            return []
        labels = list(samples) if samples is not None else [f"row {k}" for k in range(len(items))]
        if self.dropout.rate:
            items, record = self.dropout.apply(items, step)
            if record is not None:
                with self._lock:
                    self.stats.dropout.append(record.as_dict())
        if self.guard is not None:
            return self.guard.around(self._records_plain, items, labels)
        return self._records_plain(items, labels)

    def _records_plain(self, items: Sequence[Item], labels: Sequence[str]) -> list[dict[str, Any]]:
        """`records` without the guard."""
        if not items:
            return []
        labels = list(labels)
        too_long = self._over_bound(items)
        if too_long:  # not sent: each an unscored verdict saying why, the rest judged
            kept = [k for k in range(len(items)) if k not in too_long]
            judged = iter(self._records_plain([items[k] for k in kept], [labels[k] for k in kept]))
            return [
                self._unsent(items[k], too_long[k]) if k in too_long else next(judged)
                for k in range(len(items))
            ]
        from jurybox.rubrics.checklist import checklist_calls

        with self._lock:
            self.stats.judge_calls += len(self._jury.spec.judges) * checklist_calls(
                self.rubric, items
            )
        if self._client is None:
            with self._lock:  # an in-process jury judges one batch at a time
                self.stats.requests += 1
                return self._resolved(self._judged(list(items), labels))
        per = self._per_request
        if (
            self.rubric.checklist is not None
        ):  # a checklist's points counted: per_point, a call each
            spans = chunks(self.rubric, items, self._jury.max_items, self._jury.max_judge_calls)
        else:
            spans = [(k, k + per) for k in range(0, len(items), per)]
        batches = [(list(items[a:b]), labels[a:b]) for a, b in spans]
        with self._lock:
            self.stats.requests += len(batches)
        if self._pool is None or len(batches) == 1:
            return self._resolved(
                [r for chunk, named in batches for r in self._judged(chunk, named)]
            )
        parts = list(self._pool.map(lambda c: self._judged(*c), batches))
        return self._resolved([r for part in parts for r in part])

    def _over_bound(self, items: Sequence[Item]) -> dict[int, str]:
        """The items a service would refuse for a field over its ``max_field_chars``, and why.

        A runaway generation is the policy's answer, not bad input: it is unscored (its reward
        the user's unscored policy), never a failed step. None with an in-process jury, whose
        judges say themselves what they cannot take (a prompt over their token limit).
        """
        limit = getattr(self._jury, "max_field_chars", None) if self._client is not None else None
        if limit is None:
            return {}
        out: dict[int, str] = {}
        for k, item in enumerate(items):
            for name, value in item.fields().items():
                if isinstance(value, str) and len(value) > limit:
                    out[k] = (
                        f"{name}: {len(value):,} characters, more than the limit of {limit:,} "
                        f"of the service at {self.url} (max_field_chars): not sent to the judges"
                    )
                    break
        return out

    def _unsent(self, item: Item, why: str) -> dict[str, Any]:
        """The unscored verdict record of an item not sent to the judges, saying why."""
        names = [c.name for c in self.rubric.criteria]
        if self.rubric.formula is not None:
            names.append(self.rubric.formula.name)
        if self.rubric.checklist is not None and self.rubric.checklist.expands:
            names = [self.rubric.checklist.name]  # (an item's score; its points unjudged)
        empty: dict[str, float | None] = dict.fromkeys(names)
        return {
            "id": item.id,
            "status": "unscored",
            "rubric": self.rubric.name,
            "jury": self._jury.spec.name,
            "provenance": "",
            "scores": empty,
            "reasons": [why],
            "votes": [],
            "calibrated": dict(empty) if self.spec.calibrated else None,
        }

    def _resolved(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The records as the reward reads them.

        With ``use="expected"``, decided again from the judges' expected scores (each saying which
        scores it holds and why).
        """
        if self.resolved.use == "score":
            return records
        out = []
        for record in records:
            rec, used, note = self.resolved.record(record)
            data = rec.to_dict() if not isinstance(rec, Mapping) else dict(rec)
            data["reward_scores"], data["reward_note"] = used, note or None
            out.append(data)
        return out

    def _judged(self, items: list[Item], samples: list[str]) -> list[dict[str, Any]]:
        try:
            return self._jury.score_records(self.rubric, items)
        except JuryboxError as exc:
            raise _naming(exc, samples) from exc

    def log_unscored(
        self,
        records: Sequence[Mapping[str, Any]],
        samples: Sequence[str] | None = None,
        rewards: Reward | Sequence[Reward] | None = None,
    ) -> int:
        """Count and log the records with no number for ``rewards``.

        One warning names jurybox, the reward, and each sample with its cause.

        Args:
            records: Verdict records.
            samples: One label per record (default ``row <k>``).
            rewards: The rewards to check (default: this one's reward; with several, a record
                missing any of them counts).

        Returns:
            How many records have no number.
        """
        bound = (
            [self.reward]
            if rewards is None
            else ([rewards] if isinstance(rewards, Reward) else list(rewards))
        )
        labels = list(samples) if samples is not None else [f"row {k}" for k in range(len(records))]
        missing: list[tuple[str, str]] = []
        floored = self.floored(records)  # rewarded with the guard's floor (and logged by it)
        for k, (label, record) in enumerate(zip(labels, records)):
            if k in floored:
                continue
            why = next((w for value, w in (r.raw(record) for r in bound) if value is None), None)
            if why is not None:
                missing.append((label, why))
        with self._lock:
            self.stats.rows += len(records)
            self.stats.unscored += len(missing)
        if missing:
            shown = "; ".join(f"{label}: {short(why)}" for label, why in missing[:5])
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            names = ", ".join(r.name for r in bound)
            logger.warning(
                "jurybox: %d of %d rewards (%s) unscored: %s%s",
                len(missing),
                len(records),
                names,
                shown,
                more,
            )
        return len(missing)

    def rewards_of(
        self, items: Sequence[Item], samples: Sequence[str] | None = None
    ) -> tuple[list[float | None], list[dict[str, Any]]]:
        """Judge ``items``: their rewards and verdict records.

        Args:
            items: The items to judge.
            samples: One label per item, for errors and the log (default ``row <k>``).

        Returns:
            The rewards (the unscored policy applied), one per item, and the verdict records.

        Raises:
            UnscoredReward: The reward's unscored policy is ``error`` and an item has no reward
                (raised after counting and logging).
            InputError: An item the rubric cannot judge, or a request the service refused, naming
                jurybox and the sample at fault where the service says which.
            ExecutionError: The jury or the service could not judge (a judge that failed, a service
                that could not answer), naming jurybox and the samples.
        """
        records = self.records(items, samples)
        self.log_unscored(records, samples)
        return self.values_of(records), records

    def rewards(self, rows: Sequence[Mapping[str, Any]]) -> list[float | None]:
        """One reward per row of the client's fields (see `item`).

        Args:
            rows: The client's rows.

        Returns:
            One reward per row, in order (None: unscored, where the policy says so).

        Raises:
            UnscoredReward: The reward's unscored policy is ``error`` and a row has no reward.
            InputError: An item the rubric cannot judge, or a request the service refused, naming
                jurybox and the sample at fault where the service says which.
            ExecutionError: The jury or the service could not judge (a judge that failed, a service
                that could not answer), naming jurybox and the samples.
        """
        return self.rewards_of([self.item(k, row) for k, row in enumerate(rows)])[0]

    # -- groups -------------------------------------------------------------------------------

    def group_results(
        self,
        groups: Sequence[Group],
        spec: GroupSpec,
        pointwise: Rubric | None = None,
        reward: RewardSpec | None = None,
    ) -> list[GroupResult]:
        """Each group's rewards, the completions of one prompt against each other.

        See `jurybox.judges.groups`. Through a service: ``POST /v1/groups``, as many groups per
        request as its limits allow (a group whose design alone exceeds them is refused here, naming
        the limit, before any request); an in-process jury judges them in one job.

        Args:
            groups: The groups.
            spec: The design; this one's rubric is the design's.
            pointwise: The pointwise rubric, for designs that score completions alone.
            reward: The pointwise reward; by default this one's.

        Returns:
            Each group's result, in order.

        Raises:
            InputError: A group whose design alone exceeds the service's limits, or a request the
                service refused, naming jurybox and the groups.
            ExecutionError: The jury or the service could not judge, naming jurybox and the groups.
        """
        from jurybox.judges.groups import GroupJob, GroupResult

        if not groups:
            return []
        point = reward if reward is not None else self.spec
        job = GroupJob(spec, self.rubric, self._jury.spec, groups, pointwise, point)
        if self._client is None:
            from jurybox.judges.groups import judge_groups

            with self._lock:
                self.stats.requests += 1
                return judge_groups(self._jury, job)
        calls = [c.calls for c in job.costs()]
        if self.rubric.checklist is not None:  # (design pointwise: a call per point, per_point)
            from jurybox.rubrics.checklist import checklist_calls

            calls = [
                len(g.completions)
                * checklist_calls(
                    self.rubric, [Item(id="probe", checklist=g.fields.get("checklist"))]
                )
                for g in groups
            ]
        chunks = self._group_chunks(groups, calls)
        with self._lock:
            self.stats.requests += len(chunks)

        def send(chunk: list[Group]) -> list[GroupResult]:
            payload = {
                "rubric": self._jury._ref(self.rubric),
                "pointwise": self._jury._ref(pointwise) if pointwise is not None else None,
                "design": spec.model_dump(mode="json"),
                "score": point.score,
                "scale": point.scale,
                "allow_empty": True,
                "groups": [
                    {"id": g.key, **dict(g.fields), "completions": list(g.completions)}
                    for g in chunk
                ],
            }
            try:
                answers = self._client.groups(payload)
            except JuryboxError as exc:
                raise _naming(exc, [f"group {g.key}" for g in chunk]) from exc
            return [GroupResult.model_validate(a) for a in answers]

        if self._pool is None or len(chunks) == 1:
            return [r for chunk in chunks for r in send(chunk)]
        return [r for part in self._pool.map(send, chunks) for r in part]

    def group_rewards(
        self,
        rows: Sequence[Mapping[str, Any]],
        key: str,
        spec: GroupSpec,
        pointwise: Rubric | None = None,
        reward: RewardSpec | None = None,
        size: int | None = None,
    ) -> tuple[list[float | None], list[GroupResult]]:
        """Group rewards of a client's rows (see `item`), grouped by the value of a column.

        Rows of one group need not be side by side.

        Args:
            rows: The client's rows.
            key: The column whose value is a row's group.
            spec: The design.
            pointwise: The pointwise rubric, for designs that score completions alone.
            reward: The pointwise reward; by default this one's.
            size: Every group must have that many rows.

        Returns:
            One reward per row, in order, and each group's result (in order of first appearance).

        Raises:
            InputError: A row without the ``key`` column, rows of a group that do not share every
                item field but the response (naming the row and the field), a group that has not
                ``size`` rows (naming the group), or what `group_results` raises.
            ExecutionError: The jury or the service could not judge.
        """
        from jurybox.judges.groups import Group

        members: dict[Any, list[int]] = {}
        for k, row in enumerate(rows):
            if key not in row:
                raise InputError(
                    f"jurybox: row {k} has no column {key!r} (the group key)", field="key"
                )
            members.setdefault(row[key], []).append(k)
        items = [self.item(k, row) for k, row in enumerate(rows)]
        groups: list[Group] = []
        for name, ks in members.items():
            if size is not None and len(ks) != size:
                raise InputError(
                    f"jurybox: group {key}={name!r} has {len(ks)} rows; every "
                    f"group should have {size}",
                    field="size",
                )
            shared = {
                f: v
                for f, v in items[ks[0]].fields().items()
                if f != "response" and v is not None and v != []
            }
            for k in ks[1:]:
                other = {
                    f: v
                    for f, v in items[k].fields().items()
                    if f != "response" and v is not None and v != []
                }
                if other != shared:
                    field = next(f for f in (*shared, *other) if shared.get(f) != other.get(f))
                    raise InputError(
                        f"jurybox: row {k} is in group {key}={name!r} with row "
                        f"{ks[0]} but has another {field}",
                        field=field,
                    )
            groups.append(Group(f"{key}={name}", shared, [items[k].response or "" for k in ks]))
        results = self.group_results(groups, spec, pointwise, reward)
        out: list[float | None] = [None] * len(rows)
        for ks, result in zip(members.values(), results):
            for k, value in zip(ks, result.rewards):
                out[k] = value
        return out, results

    def _group_chunks(self, groups: Sequence[Group], calls: Sequence[int]) -> list[list[Group]]:
        """Whole groups per request, within the service's limits.

        Within max_items (completions) and max_judge_calls (the design's calls); a group beyond them
        alone is an InputError.
        """
        max_items, max_calls = self._jury.max_items, self._jury.max_judge_calls
        chunks: list[list[Group]] = []
        size = cost = 0
        for group, n in zip(groups, calls):
            k = len(group.completions)
            if k > max_items or n > max_calls:
                limit = (
                    f"{k} completions; the service takes at most {max_items} per request "
                    "(max_items)"
                    if k > max_items
                    else f"{n} judge calls per judge; the service takes at most {max_calls} per "
                    "request (max_judge_calls)"
                )
                raise InputError(
                    f"jurybox: group {group.key}: its design asks {limit}: give a "
                    "design with fewer calls (regular or swiss with a smaller "
                    "per_completion, anchor, listwise) or a smaller group",
                    field="design",
                )
            if chunks and size + k <= max_items and cost + n <= max_calls:
                chunks[-1].append(group)
                size, cost = size + k, cost + n
            else:
                chunks.append([group])
                size, cost = k, n
        return chunks

    def close(self) -> None:
        """Close the service connection (an in-process jury is the caller's to close)."""
        if getattr(self, "guard", None) is not None:
            self.guard.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        if self._client is not None:
            self._client.close()


def _local_models(judges: Sequence[Any]) -> None:
    """Refuse, in the client-only install, an in-process jury whose judges run local models.

    Their backends (transformers, vLLM) need torch, which only the full jurybox installs: said now,
    not at the first batch as ``No module named 'torch'``.
    """
    from jurybox.judges.backends.registry import backend_kind
    from jurybox.rubrics.errors import client_only, needs_full_install

    local = [f"{j.name} ({j.backend})" for j in judges if backend_kind(j.backend).weights]
    if local and client_only():
        raise needs_full_install(
            f"jurybox: an in-process jury (jury=) whose judges run local models "
            f"({', '.join(local)})",
            "torch",
        )


def _naming(exc: JuryboxError, samples: Sequence[str], doing: str | None = None) -> JuryboxError:
    """``exc`` with jurybox and the samples it concerns in its message.

    The one the service names (``items[k]``) where it names one, else all of them (or ``doing``,
    what failed).
    """
    field = exc.field if isinstance(exc, InputError) else None
    which = f"samples {', '.join(samples)}" if len(samples) > 1 else (samples or ["?"])[0]
    if field is not None and field.startswith("items["):
        k = field[len("items[") :].split("]", 1)[0]
        if k.isdigit() and int(k) < len(samples):
            which = samples[int(k)]
    message = f"{doing}: {exc}" if doing else f"jurybox could not judge {which}: {exc}"
    if isinstance(exc, InputError):
        return InputError(message, field=field)
    if isinstance(type(exc).__init__, WrapperDescriptorType):  # an exception's own __init__:
        return type(exc)(message)  # keep its type (e.g. the client's ServiceError)
    return ExecutionError(message) if isinstance(exc, ExecutionError) else JuryboxError(message)
