"""Command-line interface: options become config objects; the library does the work."""

from .main import main

__all__ = ["main"]
