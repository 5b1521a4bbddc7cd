"""Session-wide test settings.

``run`` adds rounds by default until the slowdown's interval is within 5%
(``--precision``). Tests that run real workers on tiny cases measure a fixed number of
rounds instead: their timings are too noisy for any target, and the number of rounds is
what they check. ``tests/test_rounds.py`` checks the default itself (it removes this
setting where it needs the default).
"""

from __future__ import annotations

import os

os.environ["CKPTBENCH_PRECISION"] = "off"
