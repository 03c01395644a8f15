"""Make the small model zoo the batch examples of the README and docs/batches.md
run on, from the bundled fixtures, and the rules file they name. Run from the
repository root:

    python3 docs/make_zoo.py /tmp/zoo-demo

It writes /tmp/zoo-demo/zoo (two teams' models: a frozen GraphDef in binary and in
text, a .meta, a SavedModel, and a file that is not a graph) and
/tmp/zoo-demo/rules.toml; run the examples from /tmp/zoo-demo. It copies files
and runs nothing.
"""

import os
import shutil
import sys

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")

# docs/batches.md shows this file (tests/test_batch.py checks that they agree)
RULES = """[[rule]]
op = "Sign"                       # or: node = "encoder/*/Sign"
gradient = "ste(clip=2.0)"
exclude = ["binarize_input/*"]    # optional, as is match = [...]

[[rule]]
op = "Round"
gradient = "QuantizeGrad"
"""


def make_zoo(folder: str) -> None:
    """``folder/zoo`` and ``folder/rules.toml``; a zoo already there is refused."""
    zoo = os.path.join(folder, "zoo")
    if os.path.exists(zoo):
        sys.exit(f"{zoo} exists; name another folder")
    os.makedirs(os.path.join(zoo, "team_a", "binary"))
    os.makedirs(os.path.join(zoo, "team_b"))
    shutil.copy(os.path.join(FIXTURES, "binary_net.pb"), os.path.join(zoo, "team_a", "binary", "net.pb"))
    shutil.copy(os.path.join(FIXTURES, "binary_net.pbtxt"), os.path.join(zoo, "team_a", "net_text.pbtxt"))
    shutil.copy(os.path.join(FIXTURES, "model.meta"), os.path.join(zoo, "team_b", "model.meta"))
    shutil.copytree(os.path.join(FIXTURES, "saved_model"), os.path.join(zoo, "team_b", "exported"))
    with open(os.path.join(zoo, "team_b", "broken.pb"), "wb") as broken:
        broken.write(b"not a graph")
    with open(os.path.join(folder, "rules.toml"), "w") as rules:
        rules.write(RULES)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 docs/make_zoo.py FOLDER")
    make_zoo(sys.argv[1])
    print(f"{os.path.join(sys.argv[1], 'zoo')} and {os.path.join(sys.argv[1], 'rules.toml')}: run the batch "
          f"examples from {sys.argv[1]}")
