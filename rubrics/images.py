"""An item's images: where they come from, the checks they pass, and what a judge is shown.

An image reference is a local path (relative ones against `ImagePolicy.root`), a
``file://`` URL, a ``data:`` URL (base64), or an ``http(s)://`` URL, fetched only where the
policy allows it (never by default). `load_image` reads it once and checks it before any
pixel is decoded: the bytes are bounded (a file's size is read from the file system, a data
URL's from its length, a download stops at the bound), the format is one of the policy's, and
the width, height and pixel count in the image's header are bounded (a decompression bomb is
refused before it is decoded); then it is decoded once, so a truncated or corrupt file is
refused here, naming the item and the file, rather than failing inside a judge.

What travels on is an `Image`: the file's own bytes, their digest (sha256, its first 16
hex digits), format and size. Engines carry images by digest and content, never by a path the
machine judging may not have. Pillow is imported only when an image is checked or decoded: it
comes with jurybox, and with jurybox-client's ``images`` extra (without it, reading an image
is an ImportError that says so).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from .errors import InputError

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")
MIME = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "WEBP": "image/webp",
    "GIF": "image/gif",
    "BMP": "image/bmp",
}
_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^,;]*)*),", re.ASCII)
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}", re.ASCII)


class ImageError(InputError):
    """An image that cannot be shown to a judge.

    It is missing, unreadable, not an image, of a format not taken, or over a limit
    (``too_large``). The message names the item and the image.
    """

    def __init__(self, message: str, field: str | None = None, too_large: bool = False) -> None:
        super().__init__(message, field=field)
        self.too_large = too_large


@dataclass(frozen=True)
class ImagePolicy:
    """Where images may come from and how large they may be.

    The defaults take any photo a camera makes (a 24-megapixel JPEG is about 8 MB) and refuse
    what no judge should decode.
    """

    max_bytes: int = 20 << 20  # one image file (encoded)
    max_pixels: int = 40_000_000  # width x height, read from the header before decoding
    max_side: int = 16_384  # the longer side, in pixels
    max_images: int = 16  # per item
    formats: tuple[str, ...] = FORMATS
    allow_remote: bool = False  # fetch http(s) URLs
    inline_only: bool = False  # data: URLs and base64 only (the scoring service: no file reads)
    root: str | None = None  # relative paths are read from here (None: the working directory)
    timeout_s: float = 20.0  # one http(s) fetch


@dataclass(frozen=True, eq=False)
class Image:
    """One checked image: its bytes, their digest, its format and size, and where it came from.

    The bytes are as given (never re-encoded); where it came from (``source``) is for messages
    only, never for identity.
    """

    digest: str
    data: bytes = field(repr=False)
    format: str
    width: int
    height: int
    source: str = ""

    @property
    def mime(self) -> str:
        """The image's media type (``image/png``, ...)."""
        return MIME.get(self.format, "application/octet-stream")

    @property
    def pixels(self) -> int:
        """Width times height."""
        return self.width * self.height

    def data_url(self) -> str:
        """The image as a ``data:`` URL (what an OpenAI-compatible server is sent)."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def pil(self) -> PILImage:
        """The image decoded as an RGB Pillow image (the first frame of an animation)."""
        with _pillow().open(io.BytesIO(self.data)) as opened:
            return opened.convert("RGB")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Image) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)


PILLOW_MISSING = (
    "reading images needs Pillow, which jurybox installs and jurybox-client installs with its "
    "images extra: pip install 'jurybox-client[images]' (or pip install pillow)"
)


def _pillow() -> Any:
    """Pillow's ``PIL.Image``; without Pillow, an ImportError saying how to install it."""
    try:
        from PIL import Image as PIL
    except ImportError as exc:
        raise ImportError(PILLOW_MISSING) from exc
    return PIL


def digest_of(data: bytes) -> str:
    """An image's digest: the first 16 hex digits of the sha256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:16]


def short_ref(ref: str) -> str:
    """A reference as shown in messages.

    An inline image is shown by its kind and size, a path or URL as given (cut at 120
    characters).
    """
    if ref.startswith("data:"):
        head = ref[: ref.find(",") + 1] if "," in ref[:200] else ref[:40]
        return f"{head}... ({len(ref)} characters)"
    return ref if len(ref) <= 120 else ref[:117] + "..."


def is_inline(ref: str) -> bool:
    """Whether ``ref`` carries its image itself (a ``data:`` URL), not where to find it."""
    return ref.startswith("data:")


def load_image(
    ref: str, policy: ImagePolicy = ImagePolicy(), *, item: str = "", where: str = "image"
) -> Image:
    """Read and check one image (see the module docstring).

    Raises:
        ImageError: The image cannot be shown to a judge (naming ``item``, ``where``, e.g.
            ``images[1]``, and the reference).
    """
    at = f"item {item!r}: {where} {short_ref(ref)}" if item else f"{where} {short_ref(ref)}"

    def fail(why: str, too_large: bool = False) -> ImageError:
        return ImageError(f"{at}: {why}", field=where, too_large=too_large)

    if not isinstance(ref, str) or not ref.strip():
        raise fail("empty image reference")
    data = _read(ref.strip(), policy, fail)
    return check_image(data, policy, fail, source=ref if not is_inline(ref) else "inline")


def _read(ref: str, policy: ImagePolicy, fail: Any) -> bytes:
    limit = policy.max_bytes
    if ref.startswith("data:"):
        match = _DATA_URL.match(ref)
        if match is None or ";base64" not in match["params"]:
            raise fail("a data: URL must be base64 (data:image/png;base64,...)")
        return _b64(ref[match.end() :], limit, fail)
    scheme = urlparse(ref).scheme.lower() if "://" in ref else ""
    if policy.inline_only:
        if not scheme and _BASE64.fullmatch(ref) and len(ref) >= 16:
            return _b64(ref, limit, fail)  # bare base64
        raise fail(
            "only inline images are taken here (data:image/...;base64,... URLs or "
            "base64); paths and URLs are not read on a client's word"
        )
    if scheme in ("http", "https"):
        if not policy.allow_remote:
            raise fail(
                "http(s) images are not fetched unless allowed (jurybox judge "
                "--allow-remote-images); download it and give its path"
            )
        return _fetch(ref, policy, fail)
    if scheme == "file":
        parsed = urlparse(ref)
        if parsed.netloc not in ("", "localhost"):
            raise fail(f"a file:// URL of another host ({parsed.netloc}) cannot be read")
        path = Path(unquote(parsed.path))
    elif scheme:
        raise fail(
            f"{scheme}:// is not a kind of image reference jurybox reads (a path, "
            "file://, data: or, where allowed, http(s)://)"
        )
    else:
        path = Path(ref).expanduser()
        if not path.is_absolute() and policy.root is not None:
            path = Path(policy.root) / path
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise fail(f"no such file ({path})") from None
    except OSError as exc:
        raise fail(f"cannot read it: {exc.strerror or exc}") from None
    if not path.is_file():
        raise fail(f"not a file ({path})")
    if size > limit:
        raise fail(f"{size:,} bytes, more than the limit of {limit:,}", True)
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)  # bounded, should the file grow meanwhile
    except OSError as exc:
        raise fail(f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise fail(f"more than the limit of {limit:,} bytes", True)
    return data


def _b64(text: str, limit: int, fail: Any) -> bytes:
    text = text.strip()
    if len(text) * 3 // 4 > limit + 2:  # checked before decoding anything
        raise fail(f"about {len(text) * 3 // 4:,} bytes, more than the limit of {limit:,}", True)
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise fail("not valid base64") from None
    if len(data) > limit:
        raise fail(f"{len(data):,} bytes, more than the limit of {limit:,}", True)
    return data


def _fetch(url: str, policy: ImagePolicy, fail: Any) -> bytes:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=policy.timeout_s) as response:
            data: bytes = response.read(policy.max_bytes + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise fail(f"could not be fetched: {exc}") from None
    if len(data) > policy.max_bytes:
        raise fail(f"more than the limit of {policy.max_bytes:,} bytes", True)
    return data


def check_image(data: bytes, policy: ImagePolicy, fail: Any = None, source: str = "") -> Image:
    """``data`` as a checked `Image`.

    Its format is one of the policy's, its header's size within the bounds (read before any pixel
    is decoded); then it is decoded once.
    """
    import warnings

    PIL = _pillow()
    if fail is None:

        def fail(why: str, too_large: bool = False) -> ImageError:
            return ImageError(f"image: {why}", field="image", too_large=too_large)

    if len(data) > policy.max_bytes:
        raise fail(f"{len(data):,} bytes, more than the limit of {policy.max_bytes:,}", True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PIL.DecompressionBombWarning)
            opened = PIL.open(io.BytesIO(data), formats=list(policy.formats))
    except PIL.UnidentifiedImageError:
        raise fail(f"not an image of a format taken here ({', '.join(policy.formats)})") from None
    except (PIL.DecompressionBombError, PIL.DecompressionBombWarning):
        raise fail(f"its header declares more than {policy.max_pixels:,} pixels", True) from None
    except Exception as exc:  # a broken header
        raise fail(f"unreadable image: {type(exc).__name__}: {exc}") from None
    with opened:
        width, height = opened.size
        fmt = str(opened.format)
        if width < 1 or height < 1:
            raise fail(f"an image of {width}x{height} pixels")
        if max(width, height) > policy.max_side:
            raise fail(
                f"{width}x{height} pixels; a side may have at most {policy.max_side:,}", True
            )
        if width * height > policy.max_pixels:
            raise fail(
                f"{width}x{height} = {width * height:,} pixels, more than the limit of "
                f"{policy.max_pixels:,}",
                True,
            )
        try:
            opened.load()  # decoded once: a truncated or corrupt file fails here
        except Exception as exc:
            raise fail(f"unreadable image ({fmt}): {type(exc).__name__}: {exc}") from None
    return Image(digest_of(data), data, fmt, width, height, source)


def load_images(
    refs: Sequence[str], policy: ImagePolicy = ImagePolicy(), *, item: str = ""
) -> tuple[Image, ...]:
    """Every image of ``refs`` (an item's), loaded and checked; at most ``max_images``."""
    if len(refs) > policy.max_images:
        raise ImageError(
            f"item {item!r}: {len(refs)} images, more than the limit of "
            f"{policy.max_images} per item",
            field="images",
            too_large=True,
        )
    return tuple(
        load_image(ref, policy, item=item, where=f"images[{k}]") for k, ref in enumerate(refs)
    )


def image_tokens(width: int, height: int) -> int:
    """About how many prompt tokens an image of ``width`` x ``height`` takes.

    This is for budgets made before a judge's processor is known: one token per 28x28 pixels
    (Qwen2-VL's patches after merging) of the image scaled to at most 1,003,520 pixels (Qwen2.5-VL's
    default bound), at least 64 (a SmolVLM tile). Models with fixed tiles take fewer; this errs
    high.
    """
    pixels = width * height
    scale = min(1.0, (1_003_520 / pixels) ** 0.5) if pixels else 1.0
    return max(64, round(width * scale / 28) * round(height * scale / 28))
