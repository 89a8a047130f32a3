"""gpublas.runtime.source's macro expansion (kernel signatures read from a family's text): the fast whole-word
substitution gives exactly what the regex \\bNAME\\b gives, on random texts and on every kernel family."""
import glob
import re

import numpy as np
import pytest

from gpublas.runtime import source


def test_whole_word_substitution_matches_word_boundaries(rng=np.random.default_rng(7)):
    alphabet = list("AB_1 (),*\n#")
    for _ in range(3000):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 30))))
        for name in ("A", "AB", "A_1", "BB"):
            want = re.sub(rf"\b{name}\b", "<X>", text)
            assert source._sub_word(name, r"\b", lambda _: "<X>", text) == want, (name, text)
            want = re.sub(rf"\b{name}\(\s*(\w+)\s*\)", lambda m: f"<{m.group(1)}>", text)
            got = source._sub_word(name, r"\(\s*(\w+)\s*\)", lambda m: f"<{m.group(1)}>", text)
            assert got == want, (name, text)


def _regex_expand(text):
    """expand_object_macros as it was written with \\b patterns (the reference)."""
    for name, body in source._OBJECT_MACRO.findall(text):
        text = re.sub(rf"\b{name}\b", lambda _, body=body: body, text)
    for name, arg, body in source._PARAM_MACRO.findall(text):
        def expand(m, arg=arg, body=body):
            value = m.group(1).strip()
            return re.sub(rf"\b{arg}\b", value, body.replace(f"{arg}##", value))
        text = re.sub(rf"\b{name}\(\s*(\w+)\s*\)", expand, text)
    return text


@pytest.mark.parametrize("path", sorted(glob.glob(str(source.src_dir() / "*.cu")))
                         + sorted(glob.glob(str(source.src_dir().parent / "nn" / "cuda" / "*.cu"))))
def test_every_family_expands_as_with_word_boundaries(path):
    text = source.strip_comments(source.with_includes(open(path).read()))
    assert source.expand_object_macros(text) == _regex_expand(text)
    assert source.apply_defines(text, {"real": "double", "out_real": "float"}) == \
        re.sub(r"\bout_real\b", "float", re.sub(r"\breal\b", "double", text))
