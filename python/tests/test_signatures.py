"""Every function of the module (and of `random`) and every array method has
MLX 0.32.4's signature: parameter names, order, defaults, the written `/` and
`*` markers, and the calls that get past argument matching (by keyword, by
position), probed on both.  The reference is data/mlx_signatures.json (see
_signatures.py); names Loom does not have yet are listed in NOT_YET."""

import json

import pytest

import _signatures
from _backend import IS_MLX, mx

with open(_signatures.DATA) as f:
    REFERENCE = json.load(f)["entries"]

# Names of MLX 0.32.4 that Loom does not have yet: each belongs to an issue of
# the op surface (linalg, fft, conv, quantization, scans, sorting, I/O, ...).
NOT_YET: set[str] = set()


# Mismatches in bindings another helper owns, each with its reason; strict
# xfails, so a fix shows up as a failure asking to remove the entry.
KNOWN_MISMATCH: dict[str, str] = {}


def resolve(name):
    obj = mx
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def bound(name):
    """The callable the probe calls: methods bound to a sample array."""
    if name.startswith("array."):
        return getattr(mx.array([[1.0, 2.0], [3.0, 4.0]]), name.split(".", 1)[1])
    return resolve(name)


PRESENT = sorted(n for n in REFERENCE if resolve(n) is not None)


def test_missing_names_are_listed_as_not_yet():
    missing = sorted(n for n in REFERENCE if resolve(n) is None and n not in NOT_YET)
    assert not missing, f"MLX names missing from loom.core and not in NOT_YET: {missing}"


@pytest.mark.loom_only
def test_not_yet_lists_only_missing_names():
    present = sorted(n for n in NOT_YET if resolve(n) is not None)
    assert not present, f"names in NOT_YET that Loom now has (remove them): {present}"


# Loom-only keyword-only parameters, appended after MLX's own (documented in
# docs/compile.md); MLX code never passes them, so its calls are unaffected.
LOOM_EXTRA_KEYWORDS = {"compile": {"check"}}


def written(params, name=None):
    extra = LOOM_EXTRA_KEYWORDS.get(name, set()) if not IS_MLX else set()
    return [
        (p["name"], p["kind"], p["default"])
        for p in params
        if not (p["name"] in extra and p["kind"] == "keyword_only")
    ]


@pytest.mark.parametrize("name", PRESENT)
def test_signature_as_written(name):
    want = [written(o) for o in REFERENCE[name]["overloads"]]
    got = [written(o, name) for o in _signatures.overloads(resolve(name))]
    assert got == want


def with_known(names):
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISMATCH[n]))
        if n in KNOWN_MISMATCH and not IS_MLX
        else n
        for n in names
    ]


@pytest.mark.parametrize("name", with_known([n for n in PRESENT if REFERENCE[n].get("probe")]))
def test_signature_as_called(name):
    ref = REFERENCE[name]
    params = ref["overloads"][0]
    got = _signatures.probe(mx, bound(name), params)
    assert got is not None, "no call with sample arguments got past argument matching"
    want = ref["probe"]
    diffs = {
        p: (got.get(p), want[p]) for p in want if got.get(p) != want[p]
    }
    assert not diffs, f"(loom, mlx) per parameter: {diffs}"
