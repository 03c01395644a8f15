"""File-level operations the CLI and the Python API call: read, act, write; many inputs at once."""
