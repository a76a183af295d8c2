"""Draws connector/icon.png: a white gate with a check mark on the brand colour, 230 x 230 pixels.

Run from the repository root with Pillow installed (``pip install -e '.[dev]'``):
``python -m tools.connector.icon``. The brand colour is read from apiProperties.json, so the
icon and the connector's ``iconBrandColor`` stay the same colour.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw

CONNECTOR = Path(__file__).resolve().parents[2] / "connector"
SIZE = 230
SCALE = 4  # drawn large and scaled down, for smooth edges
WHITE = (255, 255, 255)


def brand_colour() -> str:
    properties = json.loads((CONNECTOR / "apiProperties.json").read_text(encoding="utf-8"))
    colour: str = properties["properties"]["iconBrandColor"]
    return colour


def draw(colour: str) -> Image.Image:
    big = SIZE * SCALE
    image = Image.new("RGB", (big, big), colour)
    pen = ImageDraw.Draw(image)

    def at(*points: float) -> list[float]:
        return [point * SCALE for point in points]

    stroke = 15 * SCALE
    # The gate: two posts joined by a round arch.
    left, right, top, bottom = 62, 168, 50, 182
    pen.arc(at(left, top, right, top + (right - left)), 180, 360, fill=WHITE, width=stroke)
    arch_middle = top + (right - left) / 2
    for post in (left, right - 15):
        pen.rectangle(at(post, arch_middle, post + 15, bottom), fill=WHITE)
    # The check mark through it, with round ends.
    check = at(88, 126, 106, 144, 138, 108)
    pen.line(check, fill=WHITE, width=stroke, joint="curve")
    radius = stroke / 2
    for end_x, end_y in ((check[0], check[1]), (check[4], check[5])):
        pen.ellipse((end_x - radius, end_y - radius, end_x + radius, end_y + radius), fill=WHITE)
    return image.resize((SIZE, SIZE), Image.Resampling.LANCZOS)


if __name__ == "__main__":
    draw(brand_colour()).save(CONNECTOR / "icon.png", optimize=True)
