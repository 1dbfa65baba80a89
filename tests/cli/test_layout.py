"""The tests are laid out like the code (tests/README.md): each test module in the folder of the stage it tests, what
tests share in tests/support (or the pack's tests/policies/pack_harness.py), no test module importing another, none
over 400 lines."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from support import ROOT

TESTS = ROOT / "tests"
LIMIT = 400
# Over the limit while other branches edit them; each is to be split by what it tests. A module split below the
# limit fails `test_no_test_module_is_over_400_lines` until it leaves this list.
OVER_LIMIT_FOR_NOW: set[str] = set()


def modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "corpus" not in p.relative_to(TESTS).parts)


def imported(path: Path) -> set[str]:
    """The top-level names of every module `path` imports (inside functions too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_module_imports_another():
    offending = {str(p.relative_to(ROOT)): sorted(n for n in imported(p) if n.startswith("test_") or n == "conftest")
                 for p in modules()}
    assert {path: names for path, names in offending.items() if names} == {}, \
        "a builder or fixture two test modules share goes to tests/support"


def test_the_import_check_sees_an_import_inside_a_function(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text("def test_x():\n    from test_verify_e2e import make_estate\n    import support.estates\n")
    assert imported(planted) == {"test_verify_e2e", "support"}


def test_no_test_module_is_over_400_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in modules()}
    over = {path: n for path, n in sizes.items() if n > LIMIT and path not in OVER_LIMIT_FOR_NOW}
    assert over == {}, f"split by what they test (a seam, not a line count): {over}"
    split = sorted(path for path in OVER_LIMIT_FOR_NOW if sizes.get(path, 0) <= LIMIT)
    assert split == [], f"no longer over {LIMIT} lines (or gone): take them out of OVER_LIMIT_FOR_NOW"


def test_every_test_module_sits_in_a_stage_folder_named_in_the_readme():
    readme = (TESTS / "README.md").read_text()
    folders = {p.parent.relative_to(ROOT).as_posix() for p in modules()}
    assert "tests" not in folders, "a test module directly in tests/: put it in the folder of what it tests"
    assert sorted(f for f in folders if f"`{f}/`" not in readme) == [], "tests/README.md names every folder"


def test_test_module_names_are_unique():
    """pytest imports test modules by their file name (rootdir-relative folders are not packages here): two of
    one name in two folders would not both load."""
    counts = Counter(p.name for p in modules())
    assert [name for name, n in counts.items() if n > 1] == []
