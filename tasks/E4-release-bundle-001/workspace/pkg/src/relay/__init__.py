"""relay: forwards order events from the shop to the warehouse queue."""

__version__ = "2.4.1"
