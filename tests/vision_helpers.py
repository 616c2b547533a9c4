"""What the tests of judges that see images share (#55): two small images (tests/data/images:
a leaf, and a leaf with brown spots), MIRAGE-style identification items that show them, and a
replay jury of a judge that sees images (the tiny-vision jury's, answering with its answers
recorded by tests/data/record_vision.py) beside a text-only one (the tiny jury's SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
IMAGES = HERE / "data" / "images"
LEAF, SPOTS = IMAGES / "leaf.png", IMAGES / "spots.jpg"
VISION_RECORDING = HERE / "data" / "tiny-vision-recorded.json.gz"

ROWS: list[dict[str, Any]] = [
    {
        "id": "v1",
        "question": "What is this plant?",
        "response": "A tomato leaf, healthy.",
        "entity_name": "tomato",
        "images": ["leaf.png"],
    },
    {
        "id": "v2",
        "question": "What are these spots on my tomato?",
        "response": "Early blight: brown spots with rings.",
        "entity_name": "early blight",
        "images": ["spots.jpg"],
    },
    {
        "id": "v3",
        "question": "Which of these leaves is sick?",
        "response": "The spotted one has early blight.",
        "entity_name": "early blight",
        "images": ["leaf.png", "spots.jpg"],
    },
    {
        "id": "v4",
        "question": "What is eating my kale?",
        "response": "Cabbage worms.",
        "entity_name": "cabbage worm",
    },
]


def write_rows(path: Path, rows: list[dict[str, Any]] = ROWS) -> Path:
    """The rows as a JSONL prediction file at ``path``, its images beside it (relative paths,
    as MIRAGE's)."""
    import shutil

    path.parent.mkdir(parents=True, exist_ok=True)
    for image in (LEAF, SPOTS):
        shutil.copy(image, path.parent / image.name)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def items(rows: list[dict[str, Any]] = ROWS) -> list[Any]:
    """The rows as Items, their images as absolute paths."""
    from jurybox.rubrics import Item

    return [
        Item(
            id=r["id"],
            question=r["question"],
            response=r["response"],
            images=[str(IMAGES / i) for i in r.get("images", [])],
            extra={"entity_name": r["entity_name"]},
        )
        for r in rows
    ]


def write_vision_replay_jury(path: Path, delay_s: float = 0.0) -> Path:
    """A jury file at ``path``: the tiny-vision judge (vision: true) and the tiny jury's SmolLM2
    (vision: false), both answering with recorded answers (backend replay)."""
    import yaml

    from jurybox.judges import load_jury_spec

    recordings = [str(VISION_RECORDING), str(HERE / "data" / "tiny-recorded.json.gz")]
    kwargs: dict[str, Any] = {"recording": recordings, **({"delay_s": delay_s} if delay_s else {})}
    vision = load_jury_spec("tiny-vision").judges[0].model_dump(mode="json", exclude_defaults=True)
    text = load_jury_spec("tiny").judges[0].model_dump(mode="json", exclude_defaults=True)
    spec = {
        "name": "tiny-vision-replay",
        "description": "The tiny-vision judge's recorded answers beside SmolLM2's, for tests.",
        "judges": [
            {**vision, "backend": "replay", "engine_kwargs": kwargs},
            {**text, "backend": "replay", "vision": False, "engine_kwargs": kwargs},
        ],
        "aggregation": {"method": "mean", "quorum": 1},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
