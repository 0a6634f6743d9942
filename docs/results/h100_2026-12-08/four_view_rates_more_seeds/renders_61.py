"""Seed 9's renders of held-out view 61.jpg at 30,000 views, one run per row: stock splatfacto, four views per step
with the square-root rule, four views per step with unscaled rates; each row ground truth | render | depth (near is
dark). Run from the repository root: python renders_61.py OUT.jpg"""

import sys
from pathlib import Path

from PIL import Image

HERE = Path(__file__).parent
ROWS = [HERE / "stock_seed_9" / "renders" / "stock" / "030000_61.jpg",
        HERE / "exponent_0.5" / "seed_9" / "odin-b4" / "renders" / "odin-b4" / "030000_61.jpg",
        HERE / "exponent_0" / "seed_9" / "odin-b4" / "renders" / "odin-b4" / "030000_61.jpg"]

if __name__ == "__main__":
    images = [Image.open(path) for path in ROWS]
    width, height = images[0].size
    sheet = Image.new("RGB", (width, height * len(images)))
    for row, image in enumerate(images):
        sheet.paste(image, (0, row * height))
    sheet.resize((width // 2, height * len(images) // 2)).save(sys.argv[1], quality=85)
