"""A Python client of the scoring service, and a jury that judges through it.

```python
client = Client("http://127.0.0.1:8000", token=os.environ.get("JURYBOX_TOKEN"))
verdicts = client.score("mirage-mg", [Item(id="1", question="...", response="...",
                                           reference="...")])
```

``Client.score`` returns the same `Verdict` objects as ``Jury.score``.
`RemoteJury` gives the bulk runner (``jurybox judge --url``) the same interface as a
local `Jury`, so a prediction file judged through the service gets the
same output file, resume and summary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jurybox.judges import JurySpec
from jurybox.judges.cache import VerdictCache
from jurybox.judges.images import materialize_images
from jurybox.rubrics import Item, Rubric, Verdict, VerdictRecord, input_hash
from jurybox.rubrics.checklist import checklist_calls
from jurybox.rubrics.errors import ExecutionError, InputError
from jurybox.rubrics.images import ImagePolicy
from jurybox.rubrics.item_fields import DEFAULT_MAX_FIELD_CHARS

RubricArg = str | Rubric | dict[str, Any]
logger = logging.getLogger("jurybox.serving.client")


class ServiceError(ExecutionError):
    """The service could not answer (unreachable, overloaded past our retries, timed out)."""


class Client:
    """The scoring service's HTTP API as Python calls.

    Bad requests raise `InputError` naming the field; a busy service (429), a judge that could not
    answer (503), a dead ingress replica (Ray's own 5xx) or a restart (Ray's own 404, or a refused
    connection: nothing was sent) is retried after its Retry-After (else after 1, 2, 4, ... s), up
    to ``retries`` times, then raises `ServiceError` (``judge --url`` then stops, as in-process,
    having written nothing for the items it could not get verdicts for). A context manager:
    leaving the block closes the connection.

    Args:
        url: The service's base URL, e.g. ``http://127.0.0.1:8000``.
        token: The bearer token the service requires (``jurybox serve --token-env``), if any.
        timeout: Seconds one HTTP call may take.
        retries: Retries of a call the service could not answer yet (429, 503, a dead replica,
            a restart).
    """

    def __init__(
        self, url: str, token: str | None = None, timeout: float = 900.0, retries: int = 5
    ) -> None:
        import httpx

        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self.retries = retries

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connection."""
        self._http.close()

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        import httpx

        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, json=payload)
            except httpx.ConnectError as exc:  # nothing listens (a restart): nothing was sent
                if attempt == self.retries:
                    raise ServiceError(
                        f"{self.url}{path}: unreachable after {self.retries + 1} tries: "
                        f"{type(exc).__name__}: {exc}"
                    ) from None
                wait = _retry_after(None, attempt)
                logger.info(
                    "%s %s: unreachable (%s); retrying in %g s (%d of %d)",
                    method,
                    path,
                    exc,
                    wait,
                    attempt + 1,
                    self.retries,
                )
                time.sleep(wait)
                continue
            except httpx.HTTPError as exc:
                raise ServiceError(f"{self.url}{path}: {type(exc).__name__}: {exc}") from None
            if _retryable(response) and attempt < self.retries:
                wait = _retry_after(response.headers.get("retry-after"), attempt)
                logger.info(
                    "%s %s: HTTP %d; retrying in %g s (%d of %d)",
                    method,
                    path,
                    response.status_code,
                    wait,
                    attempt + 1,
                    self.retries,
                )
                time.sleep(wait)
                continue
            break
        if response.status_code < 400:
            return response.json()
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            error = {"message": response.text[:300], "field": None}
        message = f"{self.url}{path}: HTTP {response.status_code}: {error.get('message')}"
        if response.status_code in (401, 403):  # not the input's fault: the token's
            raise ServiceError(
                f"{message} (give the service's token with token=..., or "
                "JURYBOX_TOKEN for jurybox judge --url)"
            )
        if 400 <= response.status_code < 500 and not _retryable(response):
            raise InputError(message, field=error.get("field"))
        raise ServiceError(message)

    # -- the API ---------------------------------------------------------------------------------

    def score_records(
        self, rubric: RubricArg, items: Sequence[Item | dict[str, Any]], allow_empty: bool = False
    ) -> list[dict[str, Any]]:
        """The verdicts as written (the fields of a ``jurybox judge`` output line): POST /v1/score.

        Args:
            rubric: A rubric the service knows, by name, or one inline (a `Rubric` or its fields).
            items: The items to judge: `Item` objects or their fields.
            allow_empty: Judge items whose answer is empty (else they are refused).

        Returns:
            One record per item, in order.

        Raises:
            InputError: The service refused the request (a 4xx other than 429), naming the field.
            ServiceError: The service could not answer (unreachable, busy past the retries, timed
                out, or the token refused).
        """
        payload = {
            "rubric": _rubric_ref(rubric),
            "items": [_item(it) for it in items],
            "allow_empty": allow_empty,
        }
        return self._call("POST", "/v1/score", payload)["verdicts"]

    def score(
        self, rubric: RubricArg, items: Sequence[Item | dict[str, Any]], allow_empty: bool = False
    ) -> list[Verdict]:
        """One verdict per item, in order, as ``Jury.score`` gives them.

        Args:
            rubric: A rubric the service knows, by name, or one inline (a `Rubric` or its fields).
            items: The items to judge: `Item` objects or their fields.
            allow_empty: Judge items whose answer is empty (else they are refused).

        Returns:
            The verdicts, one per item, in order.

        Raises:
            InputError: The service refused the request (a 4xx other than 429), naming the field.
            ServiceError: The service could not answer (unreachable, busy past the retries, timed
                out, or the token refused).
        """
        return [
            Verdict.from_record(VerdictRecord.from_record(r))
            for r in self.score_records(rubric, items, allow_empty)
        ]

    def groups(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """POST /v1/groups: each group's rewards, in order.

        Args:
            payload: The fields of `jurybox.serving.service.groups_protocol.GroupRequest`.

        Returns:
            Each group's result, in order.

        Raises:
            InputError: The service refused the request (a 4xx other than 429), naming the field.
            ServiceError: The service could not answer.
        """
        return self._call("POST", "/v1/groups", payload)["groups"]

    def provenance(self, rubric: RubricArg) -> dict[str, Any]:
        """POST /v1/provenance: the provenance of a rubric's verdicts with the service's jury.

        Args:
            rubric: A rubric the service knows, by name, or one inline.

        Returns:
            The rubric's name, the provenance hash of its verdicts with the service's jury, and the
            calibration map applied to them (None when none is).

        Raises:
            InputError: The service refused the request, naming the field.
            ServiceError: The service could not answer.
        """
        return self._call("POST", "/v1/provenance", {"rubric": _rubric_ref(rubric)})

    def jury(self) -> dict[str, Any]:
        """GET /v1/jury: the service's jury.

        Returns:
            The service's judges, aggregation, provenances, calibration maps, limits and jury file.

        Raises:
            ServiceError: The service could not answer.
        """
        return self._call("GET", "/v1/jury")

    def rubrics(self) -> list[dict[str, Any]]:
        """GET /v1/rubrics: a summary of each rubric the service knows.

        Raises:
            ServiceError: The service could not answer.
        """
        return self._call("GET", "/v1/rubrics")["rubrics"]

    def rubric(self, name: str) -> dict[str, Any] | None:
        """The service's rubric ``name`` in full; None if it knows none by that name.

        Args:
            name: The rubric's name.

        Raises:
            ServiceError: The service could not answer.
        """
        try:
            return self._call("GET", f"/v1/rubrics/{name}")
        except InputError:
            return None

    def health(self) -> dict[str, Any]:
        """GET /healthz as it answers (also when a judge cannot answer), without retries.

        Returns:
            The service's health: its status and each judge's.

        Raises:
            ServiceError: The service cannot be reached.
        """
        import httpx

        try:
            return self._http.get("/healthz").json()
        except httpx.HTTPError as exc:
            raise ServiceError(f"{self.url}/healthz: {type(exc).__name__}: {exc}") from None


class RemoteJury:
    """A jury that judges through a running service.

    What a bulk run needs of a jury (`jurybox.judges.JuryLike`). The service keeps its own verdict
    cache, if any; this side has none.

    Args:
        client: The client of the service.
        images: Where the items' image files are read from (the service takes images inline only, so
            they are read here and sent).

    Raises:
        ServiceError: The service could not answer (its jury is asked for at once).
    """

    cache: VerdictCache | None = None
    cache_hits = 0

    def __init__(self, client: Client, images: ImagePolicy | None = None) -> None:
        self.client = client
        # Where the items' image files are read from (the service takes images inline only).
        self.images = images
        info = client.jury()
        self.spec = JurySpec.model_validate(info["spec"])
        self.max_items = int(info.get("max_items") or 64)
        self.max_judge_calls = int(info.get("max_judge_calls") or self.max_items)
        # (a service that does not say has the default)
        self.max_field_chars = int(info.get("max_field_chars") or DEFAULT_MAX_FIELD_CHARS)
        self._refs: dict[str, str | dict[str, Any]] = {}

    @property
    def default_chunk_size(self) -> int:
        """Items per judging step: 32, or the service's ``max_items`` when that is fewer."""
        return min(32, self.max_items)

    def provenance(self, rubric: Rubric) -> str:
        """The provenance hash the service's verdicts with ``rubric`` carry."""
        return self.client.provenance(rubric)["provenance"]

    def records_calibration(self, rubric: Rubric) -> str | None:
        """The calibration map the service applies to this rubric's verdicts, if any."""
        return self.client.provenance(rubric).get("calibration")

    def needs_judging(self, rubric: Rubric, items: Sequence[Item]) -> bool:
        """True whenever there are items: the service's own cache, if any, answers what it can."""
        return bool(items)  # (the service's own cache answers what it can)

    def load_backends(self, on_loaded: Callable[[str, float], None] | None = None) -> None:
        """Check that every judge of the service can answer (GET /healthz).

        Args:
            on_loaded: Called as ``on_loaded(the service's URL, seconds)`` when every judge can
                answer.

        Raises:
            ServiceError: Naming the judges that cannot answer, or the service cannot be reached.
        """
        began = time.perf_counter()
        health = self.client.health()
        if health.get("status") != "ok":
            down = {j: s for j, s in (health.get("judges") or {}).items() if s != "ok"}
            raise ServiceError(f"{self.client.url}: not every judge can answer: {down}")
        if on_loaded is not None:
            on_loaded(f"the service at {self.client.url}", time.perf_counter() - began)

    def _ref(self, rubric: Rubric) -> str | dict[str, Any]:
        """The rubric by name when the service holds the very same one, else inline.

        By name, it then needs no validating or rendering in a worker.
        """
        if rubric.name not in self._refs:
            inline = _rubric_ref(rubric)
            self._refs[rubric.name] = (
                rubric.name if self.client.rubric(rubric.name) == inline else inline
            )
        return self._refs[rubric.name]

    def score_records(
        self,
        rubric: Rubric,
        items: Sequence[Item],
        keep_raw: bool = False,
        on_progress: Callable[[float], None] | None = None,
        allow_empty: bool = True,
    ) -> list[dict[str, Any]]:
        """The service's records, one per item, in order.

        Args:
            rubric: The rubric to judge with (sent by name when the service holds the very same
                one).
            items: The items to judge; as many go in one request as the service's limits allow.
            keep_raw: The service's to decide: it returns no raw outputs.
            on_progress: Called as ``on_progress(items done)`` after each request.
            allow_empty: Judge items whose answer is empty.

        Returns:
            The records, as ``jurybox judge`` writes them.

        Raises:
            InputError: The service refused a request, naming the field.
            ImageError: An item's image file cannot be read (naming the item).
            ServiceError: The service could not answer.
        """
        ref = self._ref(rubric)
        records: list[dict[str, Any]] = []
        for chunk in self._chunks(rubric, items):
            got = self.client.score_records(
                ref, [self._inline(it) for it in chunk], allow_empty=allow_empty
            )
            for record, item in zip(got, chunk):
                if item.images:  # the input as read here (the service saw it inline)
                    record["input"] = input_hash(item)
            records += got
            if on_progress is not None:
                on_progress(len(records))
        return records

    def _chunks(self, rubric: Rubric, items: Sequence[Item]) -> Iterator[Sequence[Item]]:
        """The items in requests of as many as the service's limits on items and calls allow.

        A checklist rubric's items cost `checklist_calls` each (one call per point with
        ``calls: per_point``), so its requests are packed in order up to ``max_judge_calls``; an
        item over it alone goes in a request of its own (the service's 413 names its point).
        """
        if rubric.checklist is None:
            per = max(1, min(self.max_items, self.max_judge_calls // rubric.judge_calls))
            for start in range(0, len(items), per):
                yield items[start : start + per]
            return
        chunk: list[Item] = []
        calls = 0
        for item in items:
            cost = checklist_calls(rubric, [item])
            if chunk and (len(chunk) >= self.max_items or calls + cost > self.max_judge_calls):
                yield chunk
                chunk, calls = [], 0
            chunk.append(item)
            calls += cost
        if chunk:
            yield chunk

    def _inline(self, item: Item) -> Item | dict[str, Any]:
        """The item as the service takes it: its image files read here and sent inline.

        As ``data:`` URLs; an image that cannot be read is an ImageError naming the item.
        """
        if not item.images:
            return item
        sent = materialize_images(item, self.images or ImagePolicy(), files_only=True)
        return {**_item(item), "images": sent.images}

    def score(self, rubric: Rubric, items: Sequence[Item]) -> list[Verdict]:
        """One verdict per item, in order, judged by the service.

        Args:
            rubric: The rubric to judge with.
            items: The items to judge.

        Returns:
            The verdicts, one per item, in order.

        Raises:
            InputError: The service refused a request, naming the field.
            ServiceError: The service could not answer.
        """
        return [
            Verdict.from_record(VerdictRecord.from_record(r))
            for r in self.score_records(rubric, items)
        ]

    def close(self) -> None:
        """Close the client's connection."""
        self.client.close()


def _retryable(response: Any) -> bool:
    """Whether a response is worth retrying: busy, a judge that could not answer, a dead replica.

    Busy (429), a judge that could not answer (503), or a 5xx that is not the service's own JSON
    answer: Ray Serve's proxy answering for an ingress replica that died (Serve restarts it). And
    Ray's plain-text 404 "Path ... not found": its proxy while the application starts or stops (a
    restart); the service's own 404 is JSON. A 500 or 504 of the service's own is not retried: the
    same request would fail again.
    """
    if response.status_code in (429, 503):
        return True
    if response.status_code >= 500 or response.status_code == 404:
        try:
            return "error" not in response.json()
        except ValueError:
            return True
    return False


def _retry_after(value: str | None, attempt: int = 0) -> float:
    """Seconds to wait before retry ``attempt`` + 1.

    The Retry-After header's seconds (an HTTP date counts as 5); without one, 1 s doubled at each
    retry (at most 30 s): Ray's proxy gives none.
    """
    if value is None:
        return float(min(30, 2**attempt))
    try:
        return min(60.0, max(0.0, float(value)))
    except ValueError:
        return 5.0


def _rubric_ref(rubric: RubricArg) -> str | dict[str, Any]:
    if isinstance(rubric, Rubric):
        return rubric.model_dump(mode="json", by_alias=True)
    return rubric


def _item(item: Item | dict[str, Any]) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    fields = {k: v for k, v in item.fields().items() if v is not None and v != []}
    if item.checklist is not None:  # every field of each point (fields() shows what prompts show)
        fields["checklist"] = [p.model_dump(mode="json") for p in item.checklist]
    return {"id": item.id, **fields}
