"""The openai backend: judges behind any OpenAI-compatible HTTP server.

Such a server is ``vllm serve``, SGLang or a hosted API.

Why httpx rather than the ``openai`` client: the requests carry server extensions the client
types do not know (``chat_template_kwargs``, top-level ``logprobs`` on completions), retries must
be ours to keep them to transient failures only (the client retries some 4xx too, with its own
schedule), and httpx is one small dependency where ``openai`` pulls several.

- ``prompt_format: chat`` posts the rubric's messages to ``/chat/completions`` (the server applies
  the model's chat template, as the transformers backend does locally); ``plain`` posts the same
  plain framing as the other backends to ``/completions``, for base models.
- The answer is constrained with ``response_format`` (``json_schema``) when the server takes it;
  with ``structured_outputs: auto`` a server that rejects it is asked again without, and the
  shared parser reads the last answer in the free text.
- Token logprobs (``logprobs``/``top_logprobs``) become TokenSteps when the server returns them,
  so the expected score works as with local backends. Values the server reports as -9999 (vLLM's
  stand-in for -inf: tokens the grammar forbids) are dropped.
- Requests run concurrently (at most ``concurrency`` at once), each with ``timeout_s``; only
  transient failures (429, 5xx, timeouts, dropped connections) are retried, with exponential
  backoff and jitter (``Retry-After`` honoured); anything else is the vote's error at once.
- An item's text is the judge's to read, never its control tokens: the server tokenizes with
  its own tokenizer, so each of the item's strings is escaped where the rubric's template
  inserted it: a control token of the usual chat templates (``<|im_end|>``, ``<start_of_turn>``,
  ``[INST]``, ...) inside it, or running into it from the text next to it, gets a word joiner
  (U+2060) (`escape_messages`).
- A judge that sees images (``vision``) sends a request's images as ``image_url`` parts of the
  chat message (``data:`` URLs: the server is never asked to fetch anything), where the
  rubric's template placed them, else first in the user message; it needs ``prompt_format:
  chat``.
- Reasoning judges: the server should run with a reasoning parser (``--reasoning-parser``), so the
  schema applies after the thinking and the thought comes back in ``reasoning``; without one,
  the thought is split off the content at ``reasoning.end``. The thinking budget is enforced as
  ``max_tokens = budget + answer tokens`` on the whole completion: a completion cut before it
  answered is an unscored vote that says the budget ran out.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time
from typing import TYPE_CHECKING, Any

from jurybox.rubrics.errors import Picklable

from .base import escape_messages, plain_prompt, require_vision_chat
from .protocol import CancelCheck, Generation, JudgeConfigError, Request, TokenStep

if TYPE_CHECKING:
    from ..spec import JudgeSpec


def transient(status: int) -> bool:
    """Worth asking again: rate limits, request timeouts and server-side failures."""
    return status in (408, 429) or (500 <= status < 600 and status != 501)


_MASKED = -9999.0  # vLLM's JSON stand-in for a -inf logprob


class Unescapable(ValueError):
    """A request whose item text cannot be sent to the server as text (`escape_messages`)."""


class ServerError(Picklable, RuntimeError):
    """A response other than 200 from the server, with its HTTP ``status`` and ``body``."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def steps_from_chat_logprobs(content: list[dict[str, Any]]) -> tuple[str, list[TokenStep]]:
    """TokenSteps from ``choices[0].logprobs.content`` (chat completions)."""
    steps, offset = [], 0
    for entry in content:
        top: dict[str, float] = {}
        for alt in entry.get("top_logprobs") or []:
            lp = alt.get("logprob")
            if lp is None or lp <= _MASKED:
                continue
            tok = alt["token"]
            # Two token ids that spell the same text add up, as in the local backends.
            top[tok] = math.log(math.exp(top[tok]) + math.exp(lp)) if tok in top else lp
        steps.append(TokenStep(offset, entry["token"], top))
        offset += len(entry["token"])
    return "".join(s.text for s in steps), steps


def steps_from_completion_logprobs(lp: dict[str, Any]) -> tuple[str, list[TokenStep]]:
    """TokenSteps from ``choices[0].logprobs`` (legacy completions: tokens, top_logprobs)."""
    steps, offset = [], 0
    tokens = lp.get("tokens") or []
    tops = lp.get("top_logprobs") or [None] * len(tokens)
    for tok, alts in zip(tokens, tops):
        top = {t: v for t, v in (alts or {}).items() if v is not None and v > _MASKED}
        steps.append(TokenStep(offset, tok, top))
        offset += len(tok)
    return "".join(s.text for s in steps), steps


def align_steps(text: str, full: str, steps: list[TokenStep]) -> list[TokenStep]:
    """Steps whose offsets index ``text``, given the text ``full`` their tokens spell.

    ``full`` may hold more than the answer (reasoning before it, an end-of-turn token after it);
    steps that cannot be lined up with the answer are left out, so no distribution is guessed
    from them.
    """
    if full == text:
        return steps
    at = full.rfind(text) if text else -1
    if at < 0:
        return []
    end = at + len(text)
    return [TokenStep(s.offset - at, s.text, s.top) for s in steps if at <= s.offset < end]


class OpenAIBackend:
    """A judge behind an OpenAI-compatible server (see the module docstring).

    Args:
        spec: The judge's spec (its ``execution`` gives the server's base URL and API key's
            variable).

    Raises:
        JudgeConfigError: There is no base URL (in the spec or ``OPENAI_BASE_URL``),
            ``api_key_env`` names an unset variable, or a judge that sees images has plain
            prompts.
    """

    def __init__(self, spec: JudgeSpec) -> None:
        import httpx  # noqa: F401  (fail at load, not at the first request)

        self.spec = spec
        self.name = spec.name
        self.vision = bool(spec.vision)  # decided where the jury makes it (decide_vision)
        if self.vision:
            require_vision_chat(spec)
        base = spec.execution.base_url or os.environ.get("OPENAI_BASE_URL")
        if not base:
            raise JudgeConfigError(
                f"judge {spec.name}: backend openai needs base_url in the jury file or "
                "OPENAI_BASE_URL in the environment (e.g. http://127.0.0.1:8000/v1)"
            )
        self.base_url = base.rstrip("/")
        key_var = spec.execution.api_key_env or "OPENAI_API_KEY"
        key = os.environ.get(key_var)
        if spec.execution.api_key_env and not key:
            raise JudgeConfigError(
                f"judge {spec.name}: environment variable {spec.execution.api_key_env} is not set"
            )
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.chat = spec.prompt_format == "chat"
        # What the server accepts, learned from its refusals (structured_outputs: auto).
        self.constrain = spec.structured_outputs != "off"
        self.want_logprobs = True
        self.transport: Any = None  # an httpx transport to use instead of the network (tests)

    # -- request bodies --------------------------------------------------------------------------

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body posted for ``request``.

        It holds the judge's sampling, messages (chat) or plain prompt, logprobs and the answer's
        schema, as far as the server has not refused them.
        """
        s, r = self.spec.sampling, self.spec.reasoning
        think = r.mode == "think"
        body: dict[str, Any] = {
            "model": self.spec.model,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens + (r.budget_tokens if think else 0),
        }
        if s.seed is not None:
            body["seed"] = s.seed
        # The server's tokenizer reads control tokens in the text: the item's are escaped.
        escaped = escape_messages(request)
        if isinstance(escaped, str):
            raise Unescapable(escaped)
        messages, place = escaped
        if self.chat:
            body["messages"] = messages
            if self.vision and request.images:
                from dataclasses import replace

                from ..images import chat_parts

                body["messages"] = chat_parts(
                    replace(request, messages=messages, image_place=place),
                    lambda im: {"type": "image_url", "image_url": {"url": im.data_url()}},
                )
            if r.template_kwargs:
                body["chat_template_kwargs"] = dict(r.template_kwargs)
            if self.want_logprobs:
                body.update(logprobs=True, top_logprobs=min(self.spec.top_logprobs, 20))
        else:
            body["prompt"] = plain_prompt(messages)
            if self.want_logprobs:
                body["logprobs"] = self.spec.top_logprobs
        if self.constrain:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "judgment", "schema": request.schema, "strict": True},
            }
        return body

    # -- one request -----------------------------------------------------------------------------

    async def _post(self, client: Any, request: Request) -> dict[str, Any]:
        """POST with retries for transient failures.

        Adapts to a server that refuses response_format or logprobs (when allowed to).
        """
        import httpx

        path = "/chat/completions" if self.chat else "/completions"
        attempt = 0
        while True:
            try:
                sent = self.body(request)
                resp = await client.post(self.base_url + path, json=sent, headers=self.headers)
                if resp.status_code == 200:
                    return resp.json()
                text = resp.text
                if resp.status_code == 400 and self._adapt(text, sent):
                    continue
                error: Exception = ServerError(resp.status_code, text)
                retry_after = _retry_after(resp.headers.get("retry-after"))
                again = transient(resp.status_code)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                error, retry_after, again = exc, None, True
            if not again:
                raise error
            if attempt >= self.spec.execution.max_retries:
                raise RuntimeError(
                    f"gave up after {attempt + 1} attempts: {_describe(error)}"
                ) from error
            if retry_after is None:  # exponential backoff with jitter: 0.25-0.5 s, 0.5-1 s, ...
                retry_after = min(30.0, 0.5 * 2**attempt) * (0.5 + random.random() / 2)
            await asyncio.sleep(retry_after)
            attempt += 1

    def _adapt(self, error: str, sent: dict[str, Any]) -> bool:
        """Whether a 400 refused a feature this request asked for that the judge can do without.

        If so, stop asking for it (for every later request too).
        """
        low = error.lower()
        if (
            "response_format" in sent
            and self.spec.structured_outputs == "auto"
            and any(k in low for k in ("response_format", "json_schema", "structured", "guided"))
        ):
            self.constrain = False
            return True
        if "logprobs" in sent and "logprobs" in low:
            self.want_logprobs = False
            return True
        return False

    def _generation(self, data: dict[str, Any]) -> Generation:
        r = self.spec.reasoning
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        finish = choice.get("finish_reason")
        if self.chat:
            message = choice.get("message") or {}
            text = message.get("content") or ""
            reasoning = message.get("reasoning") or message.get("reasoning_content")
            lp = (choice.get("logprobs") or {}).get("content")
            full, steps = steps_from_chat_logprobs(lp) if lp else ("", [])
        else:
            text = choice.get("text") or ""
            reasoning = None
            lp = choice.get("logprobs")
            full, steps = steps_from_completion_logprobs(lp) if lp else ("", [])
        if r.mode == "think" and reasoning is None:
            cut = text.find(r.end)
            if cut >= 0:
                reasoning = text[:cut].removeprefix(r.start).strip()
                answer = text[cut + len(r.end) :]
                steps = align_steps(answer, full, steps)
                text = answer
            else:
                # No end of thinking in sight: everything is thought, and no answer came.
                error = (
                    f"thinking budget of {r.budget_tokens} tokens exhausted before {r.end!r}"
                    if finish == "length"
                    else f"judge stopped without closing its reasoning with {r.end!r}"
                )
                return Generation(
                    error=error,
                    reasoning=text,
                    finish_reason=finish,
                    prompt_tokens=usage.get("prompt_tokens", 0),
                    output_tokens=usage.get("completion_tokens", 0),
                )
        else:
            steps = align_steps(text, full, steps)
        if r.mode == "think" and finish == "length" and not text.strip():
            return Generation(
                error=f"thinking budget of {r.budget_tokens} tokens exhausted before the answer",
                reasoning=reasoning,
                finish_reason=finish,
                prompt_tokens=usage.get("prompt_tokens", 0),
                output_tokens=usage.get("completion_tokens", 0),
            )
        return Generation(
            text=text,
            steps=steps,
            reasoning=reasoning,
            finish_reason="length" if finish == "length" else "stop",
            prompt_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
        )

    async def _one(self, client: Any, gate: asyncio.Semaphore, request: Request) -> Generation:
        async with gate:
            began = time.perf_counter()
            try:
                gen = self._generation(await self._post(client, request))
            except Unescapable as exc:  # the item's text cannot be sent as text
                gen = Generation(error=str(exc))
            except Exception as exc:  # one failed call is one unscored vote, never the run
                gen = Generation(error=f"{self.name} at {self.base_url}: {_describe(exc)}")
            gen.latency_s = time.perf_counter() - began
            return gen

    # -- the Backend contract --------------------------------------------------------------------

    async def agenerate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in order, at most ``concurrency`` requests in flight.

        A request that fails is a Generation with an error.
        """
        import httpx

        n = self.spec.execution.concurrency
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        gate = asyncio.Semaphore(n)
        async with httpx.AsyncClient(
            timeout=self.spec.execution.timeout_s, limits=limits, transport=self.transport
        ) as client:
            return list(await asyncio.gather(*(self._one(client, gate, r) for r in requests)))

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        """`agenerate` run to completion.

        From inside a running event loop it runs on its own loop in a thread. (``cancelled`` is
        not asked: a caller that can cancel awaits `agenerate`.)
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(requests))
        # Called from inside an event loop (e.g. an async server): run ours in a thread.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self.agenerate(requests)).result()

    def close(self) -> None:
        """Nothing to release: each call opens and closes its own HTTP client."""
        pass


def _retry_after(value: str | None) -> float | None:
    try:
        return min(60.0, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
