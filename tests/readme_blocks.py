"""The README's shell blocks, for the tests that run its tours as a new user would."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def sh_blocks(heading: str) -> list[str]:
    """The text of each ```sh block in the README section ``## {heading}``, in order."""
    text = README.read_text()
    section = text[text.index(f"## {heading}"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```sh\n(.*?)```", section, re.S)
