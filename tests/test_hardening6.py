"""Session of 2026-11-28 (after GPU run 8): the house's loose ends, each with a test that
fails on the code before it."""

from __future__ import annotations

import importlib.metadata

from ckptbench.backends import registry
from ckptbench.measure.peaks import framework_versions
from ckptbench.sweep import cluster


def test_every_backends_packages_come_from_its_spec():
    """The cluster probe, the result's versions and the registry named the frameworks in
    three lists of their own; a new backend folder had to edit all three."""
    specs = registry.discover()
    for s in specs:
        for name in (*s.requires, *s.distributions):
            assert name in cluster.PACKAGES, (s.name, name)
    assert cluster.PACKAGES[0] == "numpy" and len(set(cluster.PACKAGES)) == len(cluster.PACKAGES)
    assert registry.spec("jax").distributions == ("jax", "jaxlib", "equinox")
    got = framework_versions(("autograd", "no-such-distribution-ckptbench"))
    assert got == {
        "autograd_version": importlib.metadata.version("autograd"),
        "no-such-distribution-ckptbench_version": None,
    }


def test_a_narrow_columns_is_the_narrowest_layout_not_the_widest(monkeypatch):
    """COLUMNS=10 laid tables out 120 wide (a width under 20 was ignored)."""
    from ckptbench.render.console import PLAIN_WIDTH, plain_width

    for given, want in [("10", 20), ("20", 20), ("77", 77), ("99999", 10_000),
                        ("0", PLAIN_WIDTH), ("wide", PLAIN_WIDTH), ("", PLAIN_WIDTH)]:  # fmt: skip
        monkeypatch.setenv("COLUMNS", given)
        assert plain_width() == want, given
