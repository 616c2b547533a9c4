"""The labelling page in the foreground (`serve_session`, for ``jurybox label``).

It serves a started session's page (`.app`) until Ctrl-C, refusing to expose it beyond this
machine without a token, and closes the session's labels file when it stops.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from jurybox.rubrics.errors import InputError
from jurybox.serving.labelling.session import LabellingSession
from jurybox.serving.options import command_line, option

#: The addresses that reach only this machine (any other needs a token).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@command_line(
    rater=option(
        help="Your name as a rater: every label carries it (the page asks when it is not in its "
        "address).",
        show_default=False,
    ),
    host=option(help="Address to listen on (another than this machine's own needs --token-env)."),
    port=option(help="Port to listen on."),
    token_env=option(
        "--token-env",
        help="Environment variable holding a token the page and API calls must send "
        "(Authorization: Bearer).",
        show_default=False,
    ),
)
def serve_session(
    session: LabellingSession,
    *,
    rater: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8400,
    token_env: str | None = None,
    say: Callable[[str], None] | None = None,
) -> None:
    """Serve the labelling page of ``session`` at ``http://host:port/`` until Ctrl-C.

    The session's labels file is closed when it stops (or cannot start). Needs the label
    extra (uvicorn, FastAPI).

    Args:
        session: What `jurybox.serving.labelling.start.start_session` started.
        rater: The rater's name, put in the page's address (the page asks without it).
        host: Address to listen on; one other than this machine's own needs ``token_env``.
        port: Port to listen on.
        token_env: Environment variable holding a token the page and API calls must send
            (``Authorization: Bearer``).
        say: Where the line naming the page's address goes (default: stderr).

    Raises:
        InputError: ``token_env`` is not set (or empty), or ``host`` is another machine's
            address without ``token_env``.
    """
    try:
        token = None
        if token_env is not None:
            token = os.environ.get(token_env)
            if not token:
                raise InputError(
                    f"--token-env {token_env}: the environment variable is not set (or empty)",
                    field="token_env",
                )
        elif host not in LOOPBACK:
            raise InputError(
                f"--host {host} makes the page reachable from other machines: protect it "
                "with --token-env VAR (a token the page and API calls must send)",
                field="host",
            )
        import uvicorn

        from jurybox.serving.labelling.app import build_app

        address = f"http://{host}:{port}/" + (f"?rater={rater}" if rater else "")
        (say or _stderr)(
            f"labelling {len(session.items)} judged items of rubric {session.rubric.name} "
            f"(goal: {session.selector.goal}) into {session.store.path}; open {address} "
            "(Ctrl-C stops; every saved label is already on disk)"
        )
        uvicorn.run(build_app(session, token), host=host, port=port, log_level="warning")
    finally:
        session.store.close()


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
