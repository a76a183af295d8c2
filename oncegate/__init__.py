"""OnceGate: however often a flow is triggered, the business result happens once."""

__version__ = "0.5.0"
