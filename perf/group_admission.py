"""What the group route's admission costs beside the request it admits, in one run.

``POST /v1/groups`` plans a request before any judge runs (#59): its groups checked, its
images decoded once, and the prompt text of all its rounds estimated from two small probe
prompts per group and kind of call (`jurybox.serving.service.groups.planned_prompt_chars`).
This times that planning alone beside the whole request, per design, on the in-process service
over the replay jury (the tiny jury's real tokenizers and recorded answers, judges behind
stand-ins for their Serve handles, as the fast tests serve them): the share of a request's time
the planning takes. Each design's request is ``--groups`` groups of ``--k`` distinct completions
of about ``--chars`` characters, timed ``--rounds`` times alternating with its planning.

Then what admission refuses before any work, and how fast: one Swiss group of 256 completions of
30,000 characters in 8 rounds (7.7 MB, over ``max_request_prompt_chars``: 413), and 12 items of
8 PNG images of 4096x4096 to this jury, none of whose judges sees images (422), beside the same items
without images.

    python perf/group_admission.py [--groups 8] [--k 8] [--chars 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

DESIGNS = [
    ("round_robin", {"design": "round_robin"}, "pairwise"),
    ("swiss, 3 rounds", {"design": "swiss", "per_completion": 3}, "pairwise"),
    ("pointwise", {"design": "pointwise"}, "mirage-mg"),
    ("listwise", {"design": "listwise"}, "mirage-mg"),
]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--chars", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import httpx
    from judging_helpers import QUESTION, REFERENCE, write_replay_jury
    from service_helpers import LocalJudge

    from jurybox.judges import load_jury_spec
    from jurybox.judges.cpu import cpu
    from jurybox.serving.service.config import Limits, ServiceConfig
    from jurybox.serving.service.deployments import JudgeServer
    from jurybox.serving.service.groups import planned_prompt_chars
    from jurybox.serving.service.groups_protocol import GroupRequest
    from jurybox.serving.service.ingress import build_app
    from jurybox.serving.service.scoring import ScoringService

    print(f"cpu: {cpu().describe()}", flush=True)
    jury = write_replay_jury(Path(tempfile.mkdtemp()) / "jury.yaml")
    handles = {
        j.name: LocalJudge(JudgeServer(j.model_dump(mode="json")))
        for j in load_jury_spec(str(jury)).judges
    }
    limits = Limits(
        max_items=1024, max_judge_calls=1 << 16, max_concurrent=4, max_body_bytes=64 << 20
    )
    plan = ServiceConfig(jury=str(jury), limits=limits).resolve()
    scoring = ScoringService(plan.model_dump(mode="json"), handles)
    counter = iter(range(1 << 30))
    filler = "Early blight; remove the spotted leaves and mulch the soil. " * 100

    def body(spec: dict, rubric: str) -> dict:
        n = next(counter)  # distinct completions each time: nothing answered from a cache
        groups = [
            {
                "id": f"g{g}",
                "question": QUESTION,
                "reference": REFERENCE,
                "completions": [
                    f"{n}.{g}.{c} " + filler[: args.chars - 7 * c] for c in range(args.k)
                ],
            }
            for g in range(args.groups)
        ]
        return {"rubric": rubric, "design": spec, "groups": groups, "allow_empty": True}

    async def posted(route: str, payload: dict) -> tuple[httpx.Response, float]:
        transport = httpx.ASGITransport(app=build_app(scoring))
        async with httpx.AsyncClient(transport=transport, base_url="http://j", timeout=600) as h:
            began = time.perf_counter()
            r = await h.post(route, json=payload)
            return r, time.perf_counter() - began

    async def whole(payload: dict) -> float:
        r, seconds = await posted("/v1/groups", payload)
        r.raise_for_status()
        return seconds

    async def planning(payload: dict) -> float:
        request = GroupRequest.model_validate(payload)
        began = time.perf_counter()
        await planned_prompt_chars(scoring, request)
        return time.perf_counter() - began

    print(
        f"{args.groups} groups of {args.k} completions of about {args.chars} characters, "
        f"{args.rounds} rounds (medians)"
    )
    print("| design | request (s) | planning (s) | planning / request |")
    print("|---|---|---|---|")
    for name, spec, rubric in DESIGNS:
        asyncio.run(whole(body(spec, rubric)))  # warm: tokenizers, the loop's first calls
        times: list[float] = []
        plans: list[float] = []
        for _ in range(args.rounds):
            times.append(asyncio.run(whole(body(spec, rubric))))
            plans.append(asyncio.run(planning(body(spec, rubric))))
        t, p = statistics.median(times), statistics.median(plans)
        print(f"| {name} | {t:.3f} | {p:.4f} | {p / t:.3f} |", flush=True)
    refusals(posted, QUESTION, REFERENCE)
    scoring.workers.close()


def refusals(posted: Any, question: str, reference: str) -> None:
    """What admission refuses before any work, and how fast (see the module docstring)."""
    import base64
    import io

    from PIL import Image

    texts = [f"{c}: " + ("word " * 6000)[:29990] for c in range(256)]
    swiss = {
        "rubric": "pairwise",
        "design": {"design": "swiss", "per_completion": 8},
        "groups": [{"id": "g", "question": question, "completions": texts}],
    }
    buf = io.BytesIO()
    Image.new("RGB", (4096, 4096), (20, 120, 30)).save(buf, "PNG")
    png = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    item = {"question": question, "reference": reference, "response": "Early blight."}
    items = [{"id": str(i), **item, "images": [png] * 8} for i in range(12)]
    bare = [{"id": str(i), **item} for i in range(12)]
    print("\n| request | answer | seconds |\n|---|---|---|")
    for name, route, body in [
        ("one Swiss group, 256 x 30,000 characters, 8 rounds", "/v1/groups", swiss),
        (
            "12 items x 8 PNG images of 4096x4096, a jury that sees none",
            "/v1/score",
            {"rubric": "mirage-mg", "items": items},
        ),
        ("the same 12 items without images", "/v1/score", {"rubric": "mirage-mg", "items": bare}),
    ]:
        r, seconds = asyncio.run(posted(route, body))
        said = r.json().get("error", {}).get("message", "")[:90]
        print(f"| {name} | {r.status_code} {said} | {seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
