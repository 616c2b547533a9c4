"""A short smoke test of jurybox's three uses, run as a user runs them (the installed `jurybox`
command of the Python running this script), for the drift check (.ci/drift):

1. `jurybox judge` a few items with the tiny jury (the in-process engine), and `jurybox agree`
   of those verdicts with the example's human labels;
2. the same with `--engine ray` (a local Ray, Ray Data);
3. `jurybox serve`: /healthz, /metrics, a rubric by name, the README's curl example, then Ctrl-C.

Each step checks what a user would see (exit code, records, HTTP statuses, verdicts with
scores, no leak report or traceback at exit). Exits 1 naming every step that failed.

    python .ci/smoke.py WORKDIR
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # service_helpers: `jurybox serve` as a user starts it
JURYBOX = str(Path(sys.executable).with_name("jurybox"))
EXAMPLE = ROOT / "examples" / "mirage_mg.jsonl"
NOISE = ("nanobind", "leaked", "Traceback")
# The curl example of docs/guides/service.md (and the README).
README_ITEM = {
    "id": "1",
    "question": "What causes brown rings on tomato leaves?",
    "response": "Early blight.",
    "reference": "Early blight (Alternaria solani).",
}


class Failed(Exception):
    pass


def check(condition: bool, what: str, output: str = "") -> None:
    if not condition:
        raise Failed(f"{what}\n{output[-3000:]}" if output else what)


def judged(out: Path, n: int, stderr: str) -> None:
    records = [json.loads(line) for line in out.read_text().splitlines()]
    check(len(records) == n, f"{len(records)} records in {out.name}, expected {n}", stderr)
    votes = [v for r in records for v in r["votes"]]
    check(
        any(v["score"] is not None for v in votes), "no vote has a score", json.dumps(votes)[:2000]
    )
    for v in votes:
        check(v["score"] is not None or v["error"], f"unscored vote without an error: {v}")


def clean_exit(text: str, what: str, last: str) -> None:
    """No leak report or traceback, and the command's own line is its last word."""
    found = [word for word in NOISE if word in text]
    check(not found, f"{what} printed {found} (a leak report or traceback)", text)
    lines = [line for line in text.splitlines() if line.strip()]
    check(
        bool(lines) and lines[-1].startswith(last),
        f"{what} printed something after its last line {last!r}",
        text,
    )


def judge(work: Path, engine: str, n: int) -> str:
    out = work / f"{engine}.jsonl"
    run = subprocess.run(
        [
            JURYBOX,
            "judge",
            str(EXAMPLE),
            "--rubric",
            "mirage-mg",
            "--jury",
            "tiny",
            "--out",
            str(out),
            "--limit",
            str(n),
            "--no-cache",
            "--engine",
            engine,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    check(
        run.returncode == 0, f"jurybox judge --engine {engine} exited {run.returncode}", run.stderr
    )
    judged(out, n, run.stderr)
    clean_exit(run.stderr, f"jurybox judge --engine {engine}", f"{n} judged now")
    return f"{n} items judged"


def agree(work: Path) -> str:
    run = subprocess.run(
        [
            JURYBOX,
            "agree",
            str(EXAMPLE.with_suffix(".human.jsonl")),
            str(work / "local.jsonl"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    check(run.returncode == 0, f"jurybox agree exited {run.returncode}", run.stderr)
    json.loads(run.stdout)
    found = [word for word in NOISE if word in run.stderr]
    check(not found, f"jurybox agree printed {found}", run.stderr)
    return "a JSON report"


def serve(work: Path) -> str:
    import httpx
    from service_helpers import serving_as_users_do

    token, log = "smoke-token", work / "serve.log"
    auth = {"Authorization": f"Bearer {token}"}
    try:
        with serving_as_users_do(
            ["--jury", "tiny", "--token-env", "JURYBOX_TOKEN"], log, env={"JURYBOX_TOKEN": token}
        ) as url:
            for path in (
                "/healthz",
                "/metrics",
                "/v1/rubrics",
                "/v1/rubrics/mirage-mg",
                "/v1/jury",
            ):
                r = httpx.get(f"{url}{path}", headers=auth, timeout=60)
                check(r.status_code == 200, f"GET {path}: {r.status_code}", r.text)
            r = httpx.post(
                f"{url}/v1/score",
                headers=auth,
                timeout=600,
                json={"rubric": "mirage-mg", "items": [README_ITEM]},
            )
            check(
                r.status_code == 200,
                f"POST /v1/score (the README's example): {r.status_code}",
                r.text,
            )
            (verdict,) = r.json()["verdicts"]
            check(
                verdict["id"] == "1" and any(v["score"] is not None for v in verdict["votes"]),
                "the README's example got no scored vote",
                r.text,
            )
            r = httpx.post(f"{url}/v1/score", timeout=60, json={"rubric": "mirage-mg", "items": []})
            check(
                r.status_code == 401, f"POST /v1/score without the token: {r.status_code}", r.text
            )
    except AssertionError as exc:  # from the helper: it did not start, or exited badly
        raise Failed(str(exc)) from None
    clean_exit(log.read_text(errors="replace"), "jurybox serve", "shutting down ...")
    return "healthz, metrics, rubrics, jury and the README's example answered 200"


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    failed = []
    for name, step in (
        ("judge (local engine)", lambda: judge(work, "local", 3)),
        ("agree", lambda: agree(work)),
        ("judge (Ray engine)", lambda: judge(work, "ray", 2)),
        ("serve", lambda: serve(work)),
    ):
        began = time.monotonic()
        try:
            said = step()
            print(f"smoke: {name}: ok, {said} ({time.monotonic() - began:.0f} s)", flush=True)
        except Failed as exc:
            failed.append(name)
            print(f"smoke: {name}: FAILED ({time.monotonic() - began:.0f} s): {exc}", flush=True)
    if failed:
        print(f"smoke: {len(failed)} of 4 failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
