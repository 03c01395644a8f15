"""Close names in error hints: difflib's answer, with a bounded pool on big graphs."""

import difflib

from conftest import run_cli
from graphs import chain_graph
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgrad.graph.hints import POOL_LIMIT, close_names

NAMES = st.text(alphabet="ab/_1:", min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(NAMES, st.lists(NAMES, max_size=60), st.sampled_from([0.0, 0.5, 0.6, 0.9, 1.0]))
def test_on_few_names_it_is_difflibs_answer(wanted, names, cutoff):
    """The length filter drops only names difflib's ratio could not reach cutoff with."""
    assert close_names(wanted, names, cutoff=cutoff) == difflib.get_close_matches(wanted, names, 3, cutoff)


def test_among_many_names_the_close_ones_that_begin_alike_are_found():
    names = [f"layer{index}/{op}" for index in range(50_000) for op in ("Sign", "Identity")]
    assert len(names) > 10 * POOL_LIMIT
    assert close_names("layer25000/Sigm", names)[0] == "layer25000/Sign"
    assert close_names("layer4999/Identiy", names)[0] == "layer4999/Identity"


def test_a_misspelt_tensor_on_a_big_graph_gets_the_close_names(tmp_path):
    path = tmp_path / "big.pb"
    path.write_bytes(chain_graph(3 * POOL_LIMIT).SerializeToString())
    result = run_cli("insert", path, "--at", "layer4001/Sgn:0", "--grad", "ste", "-o", tmp_path / "out.pb", expect=1)
    assert "close names: layer4001/Sign" in result.stderr
