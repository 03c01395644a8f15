"""Edits: rules to nodes, rewrites, inserted gradients and surrogates, resets, summaries and diffs."""
