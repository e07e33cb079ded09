"""ccost: capacity plans for distributed GPU inference and training, priced with the alpha-beta model."""

__version__ = "0.1.0"
