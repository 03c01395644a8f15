"""The graph model: a loaded file's graphs, function bodies and nodes; which functions nodes call."""
