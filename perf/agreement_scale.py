"""Interval Krippendorff's alpha at scale: jurybox.calibration vs the ``krippendorff`` package.

Continuous scores (every value distinct, as logprob-expected judge scores are) from 4 raters
with 5% missing, at 10^3 (the largest size ``krippendorff`` can do), 10^4, 10^5 and 10^6
ratings; then the same sizes on a 5-point scale (0..4), where ``krippendorff`` does run.
Each measurement runs in its own subprocess (time with ``perf_counter``; peak memory with
``tracemalloc`` in a second, separate run so tracing does not slow the timing).
``krippendorff`` runs under a wall-clock timeout and an address-space cap, and is reported as
"did not finish" past either.

    python perf/agreement_scale.py [--timeout 60] [--mem-gb 12] [--sizes 1000,10000,...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

WORKER = textwrap.dedent("""
    import json, resource, sys, time, tracemalloc
    import numpy as np
    impl, level, mode, kind = sys.argv[1], sys.argv[2], sys.argv[4], sys.argv[6]
    n_ratings, mem_bytes = int(sys.argv[3]), int(sys.argv[5])
    resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    raters = 4
    units = n_ratings // raters
    rng = np.random.default_rng(0)
    truth = rng.normal(size=units)
    data = truth + rng.normal(scale=0.5, size=(raters, units))
    if kind == "discrete":
        data = np.clip(np.round(data + 2.0), 0, 4)
    if level == "ratio":
        data = np.exp(data)
    data[rng.random(data.shape) < 0.05] = np.nan
    if impl == "jurybox":
        from jurybox.calibration import krippendorff_alpha
        run = lambda: krippendorff_alpha(data, level).value
    else:
        import krippendorff
        run = lambda: float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
    try:
        if mode == "time":
            t0 = time.perf_counter(); value = run(); elapsed = time.perf_counter() - t0
            print(json.dumps({"value": value, "seconds": elapsed}))
        else:
            tracemalloc.start(); value = run(); peak = tracemalloc.get_traced_memory()[1]
            print(json.dumps({"value": value, "peak_mb": peak / 2**20}))
    except MemoryError:
        print(json.dumps({"error": "out of memory"}))
""")


def measure(
    impl: str, level: str, n: int, mode: str, timeout: float, mem_gb: float, kind: str
) -> dict:
    cmd = [sys.executable, "-c", WORKER, impl, level, str(n), mode, str(int(mem_gb * 2**30)), kind]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:g} s"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        if "MemoryError" in proc.stderr or "Unable to allocate" in proc.stderr:
            return {"error": f"did not finish: out of memory (cap {mem_gb:g} GB)"}
        return {"error": f"failed: {tail[:80]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(
    impl: str, level: str, n: int, timeout: float, mem_gb: float, kind: str = "continuous"
) -> dict:
    timed = measure(impl, level, n, "time", timeout, mem_gb, kind)
    if "error" in timed:
        return timed
    traced = measure(impl, level, n, "memory", timeout, mem_gb, kind)
    if "error" in traced:
        return {**timed, "peak_mb": None, "memory_error": traced["error"]}
    return {**timed, "peak_mb": traced["peak_mb"]}


def table(sizes: list[int], kind: str, timeout: float, mem_gb: float) -> None:
    print(
        f"{'ratings':>9} {'jurybox s':>10} {'jurybox MB':>11} {'kripp. s':>10} "
        f"{'kripp. MB':>10} {'time ratio':>11} {'mem ratio':>10} {'|diff|':>9}"
    )
    for n in sizes:
        ours = run("jurybox", "interval", n, timeout * 10, mem_gb, kind)
        theirs = run("krippendorff", "interval", n, timeout, mem_gb, kind)
        if "error" in ours:
            print(f"{n:>9} jurybox {ours['error']}")
            continue
        if "error" in theirs:
            print(
                f"{n:>9} {ours['seconds']:>10.4f} {ours['peak_mb']:>11.2f}  krippendorff "
                f"{theirs['error']}"
            )
            continue
        t_ratio = theirs["seconds"] / ours["seconds"]
        m_ratio = (theirs["peak_mb"] / ours["peak_mb"]) if theirs.get("peak_mb") else float("nan")
        diff = abs(theirs["value"] - ours["value"])
        mb = f"{theirs['peak_mb']:.1f}" if theirs.get("peak_mb") else "n/a"
        print(
            f"{n:>9} {ours['seconds']:>10.4f} {ours['peak_mb']:>11.2f} "
            f"{theirs['seconds']:>10.3f} {mb:>10} {t_ratio:>10.0f}x {m_ratio:>9.0f}x "
            f"{diff:>9.1e}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--mem-gb", type=float, default=12.0)
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument(
        "--extra-levels",
        default="ratio,ordinal,nominal",
        help="levels timed for jurybox only at the largest size",
    )
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it
    sizes = [int(s) for s in args.sizes.split(",")]
    for kind, title in (("continuous", "all values distinct"), ("discrete", "5-point scale 0..4")):
        print(
            f"interval alpha, 4 raters, {title}, 5% missing; krippendorff guard: "
            f"{args.timeout:g} s, {args.mem_gb:g} GB address space"
        )
        table(sizes, kind, args.timeout, args.mem_gb)
        print()
    levels = [lv for lv in args.extra_levels.split(",") if lv]
    if levels:
        n = max(sizes)
        print(f"jurybox only, {n} ratings, continuous values, other levels:")
        for level in levels:
            r = run("jurybox", level, n, args.timeout * 10, args.mem_gb)
            if "error" in r:
                print(f"  {level:>8}: {r['error']}")
            else:
                print(
                    f"  {level:>8}: {r['seconds']:.3f} s, peak {r['peak_mb']:.1f} MB, "
                    f"alpha {r['value']:.4f}"
                )


if __name__ == "__main__":
    main()
