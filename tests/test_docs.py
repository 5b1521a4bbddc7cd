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


ROOT = README.parent
DOCS = [README, *sorted((ROOT / "docs").rglob("*.md"))]


def _defines(module_file: Path, name: str) -> bool:
    """Whether ``module_file`` defines or imports ``name`` at any level (read as text: a
    backend's module may need torch or JAX to import)."""
    text = module_file.read_text(encoding="utf-8")
    pattern = rf"^\s*(def|class)\s+{name}\b|^\s*{name}\s*[:=]|\bimport\b.*\b{name}\b|^\s+{name},"
    return re.search(pattern, text, flags=re.M) is not None


def _resolves(dotted: str) -> bool:
    """A dotted name ``ckptbench.a.b.C``: its longest prefix that is a module or package, and
    the rest (one name, or a class and its member) defined there."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py")
        if not module.is_file():
            module = base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            return not rest or (len(rest) <= 2 and _defines(module, rest[0]))
    return False


def test_every_link_path_and_dotted_name_in_the_docs_exists():
    """Relative links, repository paths (`ckptbench/...`, `scripts/...`, `configs/...`) and
    dotted names (`ckptbench.a.b`) in the README and docs/ point at something that exists."""
    missing = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            if not (doc.parent / target.split("#", 1)[0]).exists():
                missing.append(f"{doc.name}: link {target}")
        for path in re.findall(r"`((?:ckptbench|scripts|configs|tests|docs)/[\w./-]+)", text):
            if not (ROOT / path.rstrip(".")).exists():
                missing.append(f"{doc.name}: path {path}")
        for dotted in re.findall(r"`(ckptbench(?:\.\w+)+)", text):
            if not _resolves(dotted):
                missing.append(f"{doc.name}: name {dotted}")
    assert not missing, "\n".join(missing)


def test_every_cross_reference_in_the_package_docstrings_exists():
    """``:mod:``/``:class:``/``:func:``/``:data:``/``:meth:`` references to ``ckptbench.…`` in
    the package's own docstrings name a module, or a name defined in one."""
    role = r":(?:mod|class|func|data|meth|attr|exc):`~?(ckptbench(?:\.\w+)+)`"
    missing = [
        f"{path.relative_to(ROOT)}: {dotted}"
        for path in sorted((ROOT / "ckptbench").rglob("*.py"))
        for dotted in re.findall(role, path.read_text(encoding="utf-8"))
        if not _resolves(dotted)
    ]
    assert not missing, "\n".join(missing)
