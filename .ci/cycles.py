"""No import circle in jurybox (#37, #53): every import between two of its modules goes one way,
those under ``if TYPE_CHECKING:`` included (a circle that only type checkers walk is still two
modules that must be read together; the types belong in the lower one, or a protocol there).
Run with PYTHONPATH=. (as .ci/check does),
so that grimp finds the package's folders; prints each circle and exits 1 where there is one."""

from __future__ import annotations

import sys

import grimp


def circles(package: str = "jurybox") -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan), each sorted."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False)
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in sorted(graph.find_modules_directly_imported_by(m)):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for m in modules:
        if m not in index:
            visit(m)
    return found


if __name__ == "__main__":
    found = circles()
    for group in found:
        print("import circle: " + " -> ".join(group), file=sys.stderr)
    print(f"import circles: {len(found)}")
    sys.exit(1 if found else 0)
