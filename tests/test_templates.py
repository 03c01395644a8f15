"""A surrogate is recorded once as a template and added many times from its bytes
(graphgrad.edits.templates.NodeTemplate): each instance must encode exactly as its
nodes, made one by one with the values in place, encode."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgrad import parse_spec
from graphgrad.edits.embed import DEVICE_SLOT, GROUP_SLOT, X_SLOT, Y_SLOT, _record
from graphgrad.readings.scope import _NODE_FIELDS, _Instance
from graphgrad.files.protos import DataType, GraphDef
from graphgrad.files.wireformat import encode_nodes

SPECS = ["ste(clip=1.0)", "identity|scale(factor=0.5)", "zero", "reverse(strength=2)", "approx_sign"]
# Names as a hostile or odd file may hold them: any text but NUL (the slots' marker), "%" and "/" included.
NAMES = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1, max_size=40)


@pytest.mark.parametrize("field_number", sorted(set(_NODE_FIELDS.values())))
@pytest.mark.parametrize("bypass", [False, True])
@pytest.mark.parametrize("in_function", [False, True])
@pytest.mark.parametrize("on_device", [False, True])
@settings(max_examples=30, deadline=None)
@given(spec=st.sampled_from(SPECS), group=NAMES, x=NAMES, y=NAMES, device=NAMES)
def test_an_instance_encodes_as_its_nodes(field_number, bypass, in_function, on_device, spec, group, x, y, device):
    template = _record(parse_spec(spec), DataType.Value("DT_FLOAT"), "node", bypass, in_function, on_device)
    values = {GROUP_SLOT: group, X_SLOT: x, Y_SLOT: y, **({DEVICE_SLOT: device} if on_device else {})}
    one_by_one = [template.node(index, values) for index in range(len(template.nodes))]
    expected = b"".join(encode_nodes(one_by_one, field_number))
    assert _Instance(template, values).encoded(field_number) == expected
    if field_number == 1:  # and the bytes are the GraphDef nodes that were meant
        parsed = GraphDef.FromString(expected).node
        assert [node.name for node in parsed] == [node.name for node in one_by_one]
        assert [list(node.input) for node in parsed] == [node.input for node in one_by_one]
