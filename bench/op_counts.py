"""What `graphgrad ops` would cost on a graph of many small nodes without its
checks for duplicate names and missing inputs: import click, count the op types
(with graphgrad's cut-down schema), print them. Not a floor: a yardstick for the
part of `ops` that the checks take."""

import sys
from collections import Counter

import click

from graphgrad.readings.small_nodes import parse

with open(sys.argv[1], "rb") as stream:
    click.echo(Counter(parse("GraphOps", stream.read()).node.op).most_common())
