"""The readings of a model: one protocol (:mod:`graphgrad.readings.protocol`), one
factory (:func:`open_reading`), three implementations — the full parse
(:mod:`~graphgrad.readings.parsed`), a frozen model's scan
(:mod:`~graphgrad.readings.frozen`), many small nodes as stored
(:mod:`~graphgrad.readings.stored`). The layers above import the factory and
the protocol, never a reading's class. See docs/design.md.
"""

from .factory import Needs, open_reading

__all__ = ["Needs", "open_reading"]
