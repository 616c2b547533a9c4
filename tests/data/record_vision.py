"""Record the tiny-vision judge's answers for the vision replay jury of the tests
(``vision_helpers.write_vision_replay_jury``): ``python tests/data/record_vision.py`` rewrites
tests/data/tiny-vision-recorded.json.gz from the items of tests/vision_helpers.py under the
mirage-id rubric, with their images, judged by the tiny-vision jury's model through
transformers (the model is built on first use: ``jurybox models fetch --jury tiny-vision``).
Re-record after a change to the rubric, the images or the model's recipe."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    from vision_helpers import VISION_RECORDING, items

    from jurybox.judges import Jury, load_jury_spec
    from jurybox.judges.backends.replay import Recording, record
    from jurybox.rubrics import load_rubric

    spec = load_jury_spec("tiny-vision")
    spec = spec.model_copy(
        update={
            "judges": [
                j.model_copy(update={"execution": j.execution.model_copy(update={"batch_size": 1})})
                for j in spec.judges
            ]
        }
    )
    rubric = load_rubric("mirage-id")
    with Jury(spec) as jury:
        loaded = jury.with_images(items())
        judges = record(jury, rubric, loaded, log=print)
    Recording(
        rubric=rubric.name,
        items=[it.model_dump(mode="json") for it in loaded],
        judges=judges,
        specs={j.name: j.model_dump(mode="json") for j in spec.judges},
        produced_by="tests/data/record_vision.py",
    ).save(VISION_RECORDING)
    print(f"wrote {VISION_RECORDING}")


if __name__ == "__main__":
    main()
