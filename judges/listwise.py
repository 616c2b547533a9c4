"""The listwise rubric: one prompt shows a whole group, its answers lettered.

Each judge scores every answer on the base rubric's criteria in one call (the ``listwise`` design
of `jurybox.judges.groups`, which re-exports these names).
"""

from __future__ import annotations

from pydantic import ValidationError

from jurybox.rubrics import Criterion, Rubric
from jurybox.rubrics.errors import InputError

from .group_spec import LETTERS

LISTWISE_SYSTEM = (
    " You are shown several answers to the same question, each under a letter. "
    "Judge each answer on its own merits: its letter and its position say "
    "nothing about it."
)
LISTWISE_TEMPLATE = """\
{% if context %}
Context:
{{ context }}

{% endif %}
Question:
{{ question }}

{% if reference %}
Reference answer (written by an expert, treat it as correct):
{{ reference }}

{% endif %}
The answers to judge:

{{ answers }}

Judge every answer on each criterion:
{% for c in criteria[:@N@] %}
- {{ c.description }}
  {{ c.scale.describe() }}
{% endfor %}

For each answer letter and criterion, the key is the letter (lowercase), an underscore and the \
criterion's name.
{{ output_format }}
"""


def listwise_rubric(base: Rubric, k: int) -> Rubric:
    """The rubric of a listwise call over ``k`` answers.

    It has ``base``'s criteria once per letter (``a_accuracy``, ``b_accuracy``, ...), all in one
    call, the answers in the item's ``answers`` field (lettered text).
    """
    if not 2 <= k <= len(LETTERS):
        raise InputError(
            f"a listwise call shows 2 to {len(LETTERS)} answers (one letter "
            f"each); this group has {k}",
            field="completions",
        )
    criteria = [
        Criterion(
            name=f"{letter.lower()}_{c.name}",
            description=f"{c.name}: {c.description}",
            scale=c.scale,
        )
        for letter in LETTERS[:k]
        for c in base.criteria
    ]
    others = [n for n in base.inputs if n not in ("question", "response")]
    try:
        return Rubric(
            name=f"{base.name}.listwise{k}",
            description=f"{base.name}, {k} answers at once",
            version=base.version,
            inputs=["question", "answers", *others],
            optional_inputs=[n for n in base.optional_inputs if n != "response"],
            mode="joint",
            system=(base.system + LISTWISE_SYSTEM).strip(),
            template=LISTWISE_TEMPLATE.replace("@N@", str(len(base.criteria))),
            criteria=criteria,
        )
    except ValidationError as exc:  # e.g. a system prompt that names the response
        first = exc.errors(include_url=False)[0]
        raise InputError(
            f"rubric {base.name} cannot be asked listwise: "
            f"{first['msg'].removeprefix('Value error, ')}",
            field="rubric",
        ) from None
