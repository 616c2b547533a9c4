"""What moved between the lock and a fresh, unlocked install (for .ci/drift).

    python .ci/drift_report.py LOCK FROZEN TARGET SMOKE_STATUS

LOCK: locks/cpu.txt; FROZEN: `pip freeze` of the unlocked environment; TARGET: what was
installed (e.g. `.[ray]`); SMOKE_STATUS: the smoke test's exit code. Prints every package whose
version differs from the lock (and those the lock does not have); with a non-zero status, as a
DRIFT report that says what to do.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def versions(path: str) -> dict[str, str]:
    found = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return found


def main() -> int:
    lock_path, frozen_path, target, status = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    lock, now = versions(lock_path), versions(frozen_path)
    moved = [
        f"  {name:32} {lock[name]} -> {now[name]}"
        for name in sorted(now)
        if name in lock and lock[name] != now[name]
    ]
    new = [f"  {name:32} (not in the lock) {now[name]}" for name in sorted(now) if name not in lock]
    changes = moved + new
    if status:
        print(
            f"DRIFT: the smoke test fails on the newest versions pyproject.toml allows for "
            f"{target} (installed without {lock_path}); a fresh install of {target} today is "
            f"broken for users. Packages that moved from the lock ({len(changes)}):"
        )
        print("\n".join(changes) if changes else "  none: the break is in jurybox itself")
        print(
            "Fix jurybox for the new version, or bound the package in pyproject.toml with a "
            "comment naming the incompatibility; then regenerate the lock (bash .ci/lock)."
        )
        return 1
    print(
        f"drift: {target} on the newest allowed versions passes the smoke test; "
        f"{len(changes)} packages differ from {lock_path}"
        + (":\n" + "\n".join(changes) if changes else ".")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
