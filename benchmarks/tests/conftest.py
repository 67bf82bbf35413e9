import textwrap

import pytest

FAKE_LOOM_CORE = textwrap.dedent('''
    """A stand-in for loom.core made of NumPy: enough for the tiny workloads,
    and without erf, so that one tiny workload is pending for Loom."""
    import numpy as _np
    from numpy import add, matmul  # noqa: F401


    def array(x):
        return _np.array(x)


    def eval(*args):
        return None
''')


@pytest.fixture
def fake_loom(tmp_path):
    """A directory whose ``loom.core`` imports: put it on the Loom worker's path."""
    root = tmp_path / "fake_loom"
    (root / "loom").mkdir(parents=True)
    (root / "loom" / "__init__.py").write_text("")
    (root / "loom" / "core.py").write_text(FAKE_LOOM_CORE)
    return str(root)


@pytest.fixture
def no_loom(tmp_path):
    """A directory whose ``loom.core`` fails to import, as before Loom is built."""
    root = tmp_path / "no_loom"
    (root / "loom").mkdir(parents=True)
    (root / "loom" / "__init__.py").write_text("")
    (root / "loom" / "core.py").write_text("raise ImportError('loom is not built here')\n")
    return str(root)
