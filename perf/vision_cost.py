"""The cost of images per judgment (#55): the tiny-vision jury's judge (built:tiny-idefics3 on
transformers, CPU) judging the same MIRAGE identification items with and without their images:
prompt tokens and seconds per judgment. ``python perf/vision_cost.py [--repeat N]``."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from vision_helpers import items

    from jurybox.judges import Jury
    from jurybox.judges.judging import render_requests
    from jurybox.rubrics import load_rubric

    rubric = load_rubric("mirage-id")
    with Jury.load("tiny-vision") as jury:
        jury.load_backends()
        backend = jury.backend(jury.spec.judges[0])
        shown = jury.with_images(items()[:3])  # one, one and two images
        bare = [it.model_copy(update={"images": []}) for it in items()[:3]]
        for name, batch in (("text only", bare), ("with images", shown)):
            requests = [r for r in render_requests(rubric, batch).requests if r is not None]
            backend.generate(requests[:1])  # warm
            seconds, tokens = [], []
            for _ in range(args.repeat):
                for r in requests:
                    began = time.perf_counter()
                    (gen,) = backend.generate([r])
                    seconds.append(time.perf_counter() - began)
                    tokens.append(gen.prompt_tokens)
            images = sum(len(r.images) for r in requests)
            print(
                f"{name}: {len(requests)} judgments ({images} images), prompt tokens "
                f"{statistics.mean(tokens):.0f} a judgment, "
                f"{statistics.median(seconds) * 1000:.0f} ms a judgment (median of "
                f"{len(seconds)})"
            )


if __name__ == "__main__":
    main()
