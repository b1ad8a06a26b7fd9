"""optnet: joint co-optimisation of optical fabrics and distributed GPU training."""

__version__ = "0.1.0"
