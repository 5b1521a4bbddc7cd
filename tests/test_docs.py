"""The README's examples are executed: its numbers come from the formulas, not from memory."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_doctests():
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    examples = "\n".join(b for b in blocks if ">>>" in b)
    assert examples, "README has no >>> examples"
    parser = doctest.DocTestParser()
    test = parser.get_doctest(examples, {}, "README", str(README), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 5


def test_readme_quickstart_is_two_commands():
    text = README.read_text(encoding="utf-8")
    quick = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in quick.splitlines() if line.startswith("    ")]
    assert len(commands) == 2
    assert "ckptbench run --model lstm --steps 1000 --snaps 31" in commands[0]
    assert "pytest" in commands[1]
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci
