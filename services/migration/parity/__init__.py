"""Adapter parity between two revisions of the adapters over the same recorded frames."""
