"""A simulated judge of known qualities, for the group rewards' tests and simulation
(perf/group_designs.py): every completion text is given a quality, and the judge answers each
prompt it gets (pointwise, pairwise in either order, listwise) from the qualities of the
answers it finds in the prompt, in the order the prompt shows them, with a position bias,
ties and noise; its answers carry a distribution over the scale (token logprobs at the value,
as a real backend's do), so expected scores are read as from a real judge.

It runs the whole judging path (the rubrics' prompts, parsing, score distributions, the
jury's decision): only the model is replaced.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np

from jurybox.judges.backends.protocol import Generation, Request, TokenStep


class SimJudge:
    """A judge that knows each completion's quality (``quality``: text -> a number, about
    N(0, 1)). Pairwise: it prefers the answer shown first when ``d = q_first - q_second + bias
    + noise`` exceeds ``tie`` (the second below ``-tie``; a tie between); pointwise: the scale
    point nearest ``q + noise`` (mapped from [-2, 2] onto the scale); listwise: each letter
    likewise, the first shown raised by ``bias`` (on that [-2, 2] span). ``sharpness`` sets how
    peaked its distribution over the scale is around its latent value."""

    def __init__(
        self,
        name: str,
        quality: Mapping[str, float],
        *,
        bias: float = 0.0,
        noise: float = 0.0,
        tie: float = 0.0,
        sharpness: float = 4.0,
        seed: int = 0,
        fail: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.quality = dict(quality)
        self.bias, self.noise, self.tie, self.sharpness = bias, noise, tie, sharpness
        self.rng = np.random.default_rng(seed)
        self.fail = fail  # texts whose prompts fail (an unscored vote)
        self.calls = 0

    def shown(self, text: str) -> list[str]:
        """The known completions in ``text``, in the order it shows them."""
        found = sorted((text.find(t), t) for t in self.quality if t in text)
        return [t for _, t in found]

    def generate(self, requests: list[Request], cancelled=None) -> list[Generation]:
        out = []
        for r in requests:
            self.calls += 1
            user = r.messages[-1]["content"]
            shown = self.shown(user)
            if any(t in self.fail for t in shown):
                out.append(Generation(error="simulated failure"))
                continue
            props = r.schema["properties"]
            answers: dict[str, tuple[str, dict[str, float], bool]] = {}
            for name, schema in props.items():
                texts = [str(v) for v in schema["enum"]]
                quoted = schema.get("type") == "string"
                if texts == ["1", "tie", "2"] or set(texts) == {"1", "2"}:
                    answers[name] = (*self._pair(texts, shown), quoted)
                else:
                    position = 0
                    target = shown[0] if shown else None
                    if "_" in name and len(name.split("_", 1)[0]) == 1:  # listwise: a_accuracy
                        position = ord(name[0]) - ord("a")
                        target = shown[position] if position < len(shown) else None
                    latent = (self.quality.get(target, 0.0) if target else 0.0) + (
                        self.noise * self.rng.normal()
                    )
                    if name[1:2] == "_" and position == 0:
                        latent += self.bias
                    answers[name] = (*self._point(texts, latent), quoted)
            out.append(_generation(answers))
        return out

    def _pair(self, texts: list[str], shown: list[str]) -> tuple[str, dict[str, float]]:
        q1 = self.quality.get(shown[0], 0.0) if shown else 0.0
        q2 = self.quality.get(shown[1], 0.0) if len(shown) > 1 else 0.0
        d = q1 - q2 + self.bias + self.noise * self.rng.normal()
        s = self.sharpness
        p1 = 1.0 / (1.0 + math.exp(-s * (d - self.tie)))
        p2 = 1.0 / (1.0 + math.exp(-s * (-d - self.tie)))
        if "tie" in texts:
            tie = max(1e-6, 1.0 - p1 - p2) if p1 + p2 < 1 else 1e-6
            probs = {"1": p1, "tie": tie, "2": p2}
            chosen = "1" if d > self.tie else "2" if d < -self.tie else "tie"
        else:
            probs = {"1": p1, "2": 1.0 - p1}
            chosen = "1" if d >= 0 else "2"
        total = sum(probs.values())
        return chosen, {k: v / total for k, v in probs.items()}

    def _point(self, texts: list[str], latent: float) -> tuple[str, dict[str, float]]:
        n = len(texts)
        at = (min(2.0, max(-2.0, latent)) + 2.0) / 4.0 * (n - 1)  # on the points' index scale
        weights = [math.exp(-self.sharpness * (p - at) ** 2) for p in range(n)]
        total = sum(weights)
        chosen = texts[int(min(n - 1, max(0, round(at))))]
        return chosen, {t: w / total for t, w in zip(texts, weights)}

    def close(self) -> None:
        pass


def _generation(answers: dict[str, tuple[str, dict[str, float], bool]]) -> Generation:
    """The JSON answer, with a token step at each value holding its distribution."""
    steps: list[TokenStep] = []
    text = "{"
    for k, (name, (chosen, probs, quoted)) in enumerate(answers.items()):
        head = ("" if k == 0 else ", ") + json.dumps(name) + ": " + ('"' if quoted else "")
        steps.append(TokenStep(len(text), head, {head: 0.0}))
        text += head
        top = {t: math.log(max(p, 1e-12)) for t, p in probs.items()}
        steps.append(TokenStep(len(text), chosen, top))
        text += chosen
        if quoted:
            steps.append(TokenStep(len(text), '"', {'"': 0.0}))
            text += '"'
    steps.append(TokenStep(len(text), "}", {"}": 0.0}))
    text += "}"
    return Generation(text=text, steps=steps, finish_reason="stop")


def sim_jury(quality: Mapping[str, float], judges: int = 2, **kwargs):
    """A :class:`jurybox.judges.Jury` of ``judges`` simulated judges (the tiny jury's spec,
    names j0, j1, ...; mean of their votes, quorum 1), each with its own noise seed."""
    from jurybox.judges import Jury, load_jury_spec

    base = load_jury_spec("tiny")
    spec = base.model_copy(
        update={
            "judges": [
                base.judges[k % len(base.judges)].model_copy(update={"name": f"j{k}"})
                for k in range(judges)
            ]
        }
    )
    seed = kwargs.pop("seed", 0)
    backends = {f"j{k}": SimJudge(f"j{k}", quality, seed=seed + k, **kwargs) for k in range(judges)}
    return Jury(spec, backends)
