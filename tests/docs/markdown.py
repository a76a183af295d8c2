"""Reading the repository's Markdown: its files, shell blocks, links and heading anchors."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {"node_modules", ".venv", ".git"}
SHELLS = {"bash", "sh", "shell"}
# Put on the line before a shell block that must not run in the tests (it starts a server...), with why.
NOT_RUN = re.compile(r"<!-- not run by tests/docs: (?P<why>.+?) -->")
# A block of what a shell block's output shows, right after it (blank lines between at most): a line each, in order.
OUTPUT = re.compile(r"\s*```text\n(?P<shown>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\((?P<target><[^>\n]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(?P<target>\S+)", re.MULTILINE)
HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
SCHEMES = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


@dataclass(frozen=True)
class ShellBlock:
    """A fenced shell block, where it starts, why it is not run (None: it is), and what its output must show."""

    path: Path
    line: int
    code: str
    not_run: str | None
    shown: str = ""

    @property
    def expectations(self) -> list[str]:
        """What the output must show, in order: the lines of the output block after it."""
        return [line.strip() for line in self.shown.splitlines() if line.strip()]

    def __str__(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def markdown_files(root: Path = REPO) -> list[Path]:
    """The Markdown files git knows of (tracked, or new and not ignored), outside node_modules."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        paths = [root / name for name in listed]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every Markdown file
        paths = list(root.rglob("*.md"))
    return sorted(path for path in paths if path.is_file() and not SKIPPED_DIRS & set(path.relative_to(root).parts))


def shell_blocks(path: Path) -> list[ShellBlock]:
    text = path.read_text(encoding="utf-8")
    blocks = []
    for fence in FENCE.finditer(text):
        if fence["info"].strip().split(" ")[0] not in SHELLS:
            continue
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.fullmatch(before.strip())
        line = text.count("\n", 0, fence.start()) + 1
        output = OUTPUT.match(text, fence.end())
        shown = output["shown"] if output else ""
        blocks.append(ShellBlock(path, line, fence["code"], marker["why"] if marker else None, shown))
    return blocks


def prose(text: str) -> str:
    """``text`` without fenced blocks and code spans, where a bracket is not a link."""
    text = FENCE.sub("", text)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text, flags=re.DOTALL)


def links(path: Path) -> list[str]:
    """Every link target of the file: inline links, images and reference definitions."""
    text = prose(path.read_text(encoding="utf-8"))
    found = [match["target"].strip("<>") for match in LINK.finditer(text)]
    return found + [match["target"].strip("<>") for match in REFERENCE.finditer(text)]


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the file's headings: lowercase, punctuation dropped, spaces as hyphens."""
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading["title"])
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` whose file, or heading anchor in a Markdown file, does not exist."""
    broken = []
    for target in links(path):
        if SCHEMES.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading has the anchor #{anchor}")
    return broken
