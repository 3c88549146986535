"""Screenshots of GUI screens as PNG bytes, for multimodal policies. Needs Pillow (the `gui` extra).

Each element is drawn as a row with its id in a badge on the left ("set-of-marks" style), so a
model that sees only the image can still name elements in `click(id)`. Pillow is imported only
when a screenshot is requested; drawing is deterministic for a given Pillow build.
"""

from __future__ import annotations

import functools
import io
from typing import Any

from rlgym_envs.gui.device import Item, Screen
from rlgym_llm import MissingDependencyError

WIDTH = 360
ROW = 34
HEADER = 48
PAD = 10
_INK, _MUTED, _ACCENT, _LINE, _BG = (33, 33, 33), (158, 158, 158), (25, 118, 210), (224, 224, 224), (250, 250, 250)


def _pil() -> Any:
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise MissingDependencyError("pillow", "gui", "GUI screenshots") from None
    return Image, ImageDraw, ImageFont


@functools.cache
def _font(size: int) -> Any:
    _, _, image_font = _pil()
    try:
        return image_font.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed-size bitmap font
        return image_font.load_default()


def _ascii(text: str) -> str:
    # The bitmap fallback font covers Latin-1 only; never fail a rollout over a glyph.
    return text.encode("latin-1", "replace").decode("latin-1")


def screenshot_png(screen: Screen) -> bytes:
    """Draw `screen` and return it as PNG bytes.

    Raises:
        MissingDependencyError: Pillow is not installed.
    """
    image_mod, draw_mod, _ = _pil()
    rows = len(screen.items) + bool(screen.above) + bool(screen.below)
    height = HEADER + PAD + max(rows, 1) * ROW + PAD
    img = image_mod.new("RGB", (WIDTH, height), _BG)
    draw = draw_mod.Draw(img)
    font, small = _font(14), _font(11)
    draw.rectangle((0, 0, WIDTH, HEADER), fill=_ACCENT)
    draw.text((PAD, HEADER // 2), _ascii(screen.title), fill="white", font=_font(16), anchor="lm")
    y = HEADER + PAD
    if screen.above:
        draw.text((WIDTH // 2, y + ROW // 2), f"^ {screen.above} more above", fill=_MUTED, font=small, anchor="mm")
        y += ROW
    for it in screen.items:
        _draw_item(draw, it, y, font, small)
        y += ROW
    if screen.below:
        draw.text((WIDTH // 2, y + ROW // 2), f"v {screen.below} more below", fill=_MUTED, font=small, anchor="mm")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _draw_item(draw: Any, it: Item, y: int, font: Any, small: Any) -> None:
    el = it.element
    mid = y + ROW // 2
    ink = _MUTED if el.disabled else _INK
    draw.rounded_rectangle((PAD, mid - 9, PAD + 24, mid + 9), radius=4, fill=(255, 193, 7))
    draw.text((PAD + 12, mid), str(it.id), fill=_INK, font=small, anchor="mm")
    x = PAD + 34
    right = WIDTH - PAD
    if el.role == "button":
        fill = _LINE if el.disabled else _ACCENT
        draw.rounded_rectangle((x, y + 4, right, y + ROW - 4), radius=6, fill=fill)
        draw.text(
            ((x + right) // 2, mid), _ascii(el.label), fill=ink if el.disabled else "white", font=font, anchor="mm"
        )
        return
    if el.role in ("textbox", "combobox"):
        draw.text((x, mid), _ascii(el.label), fill=ink, font=small, anchor="lm")
        box = (x + 90, y + 5, right, y + ROW - 5)
        draw.rectangle(box, outline=_MUTED if el.disabled else _INK, fill="white")
        draw.text((box[0] + 6, mid), _ascii(str(it.value))[:30], fill=ink, font=small, anchor="lm")
        if el.role == "combobox":
            draw.polygon([(right - 16, mid - 3), (right - 6, mid - 3), (right - 11, mid + 3)], fill=ink)
        return
    draw.text((x, mid), _ascii(el.label)[:44], fill=ink, font=font, anchor="lm")
    if el.role == "switch":
        on = bool(it.value)
        draw.rounded_rectangle((right - 40, mid - 10, right, mid + 10), radius=10, fill=_ACCENT if on else _LINE)
        knob = right - 12 if on else right - 28
        draw.ellipse((knob - 8, mid - 8, knob + 8, mid + 8), fill="white", outline=_MUTED)
    elif el.role == "checkbox":
        draw.rectangle((right - 18, mid - 9, right, mid + 9), outline=ink, fill=_ACCENT if it.value else "white")
        if it.value:
            draw.line((right - 15, mid, right - 10, mid + 5, right - 3, mid - 5), fill="white", width=2)
    elif el.role in ("listitem", "link"):
        draw.text((right, mid), ">", fill=_MUTED, font=font, anchor="rm")
        draw.line((x, y + ROW - 1, right, y + ROW - 1), fill=_LINE)
