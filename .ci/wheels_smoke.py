"""The client wheel against a live service, for .ci/wheels: run by the full wheel's Python (its
`jurybox serve`, over the tiny jury's recorded answers: the real service without a model's
time), it starts the service as a user does and runs CLIENT_CHECK in the client wheel's
environment (which has no torch): the TRL reward in URL mode and the service's Client score an
item, the fronts list only what the client holds, and judge_file names the full install.

    python .ci/wheels_smoke.py CLIENT_PYTHON WORKDIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # service_helpers, judging_helpers: as the tests start it
TOKEN_ENV, TOKEN = "JURYBOX_WHEELS_TOKEN", "wheels-token"
#: An item whose prompts the recording holds (tests/integrations/test_client_install.py's).
ITEM = {
    "id": "0",
    "question": "What causes brown rings on tomato leaves after rain?",
    "response": "Early blight, a fungal disease.",
    "reference": "Early blight (Alternaria solani).",
}
CLIENT_CHECK = """
import json, sys
import jurybox, jurybox.serving
from jurybox import Client
from jurybox.integrations.trl import jury_reward
url, item = sys.argv[1], json.loads(sys.argv[2])
reward = jury_reward(url=url, rubric="mirage-mg", token_env="JURYBOX_WHEELS_TOKEN")
rewards = reward(prompts=[item["question"]], completions=[item["response"]],
                 reference=[item["reference"]])
with Client(url, token="wheels-token") as client:
    (verdict,) = client.score("mirage-mg", [item])
try:
    from jurybox import judge_file
    refused = None
except ImportError as exc:
    refused = [type(exc).__name__, str(exc)]
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "transformers", "ray", "vllm"})
print(json.dumps({"file": jurybox.__file__, "rewards": rewards, "status": verdict.status,
                  "fronts": [jurybox.__all__, dir(jurybox), jurybox.serving.__all__],
                  "refused": refused, "heavy": heavy}))
"""


def main() -> int:
    from judging_helpers import write_replay_jury
    from service_helpers import serving_as_users_do

    client_python, work = sys.argv[1], Path(sys.argv[2])
    jury = write_replay_jury(work / "tiny-replay.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env[TOKEN_ENV] = TOKEN
    with serving_as_users_do(
        ["--jury", str(jury), "--token-env", TOKEN_ENV], work / "serve.log", env={TOKEN_ENV: TOKEN}
    ) as url:
        ran = subprocess.run(
            [client_python, "-c", CLIENT_CHECK, url, json.dumps(ITEM)],
            cwd=work,  # not the repository's root, whose jurybox/ would shadow the wheel's
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if ran.returncode != 0:
        print(ran.stdout[-3000:], ran.stderr[-3000:], sep="\n")
        return 1
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    full_only = {"judge_file", "build_jury_app", "ServiceConfig"}
    problems = [
        what
        for what, bad in (
            (f"the client imported from {out['file']}", "site-packages" not in out["file"]),
            (f"no reward: {out['rewards']}", not out["rewards"] or out["rewards"][0] is None),
            (f"Client's verdict is {out['status']}", out["status"] != "scored"),
            (
                f"a front lists what the client lacks: {out['fronts']}",
                bool(full_only & {n for names in out["fronts"] for n in names}),
            ),
            (
                f"judge_file was not refused naming pip install: {out['refused']}",
                not out["refused"]
                or out["refused"][0] != "InstallError"
                or "pip install" not in out["refused"][1],
            ),
            (f"the client imported {out['heavy']}", bool(out["heavy"])),
        )
        if bad
    ]
    for problem in problems:
        print(f"wheels: client: {problem}")
    if not problems:
        print(f"wheels: client: scored through {url} (reward {out['rewards'][0]:.3f})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
