"""Capability probes: minimal requests through the gateway that check what the capability
manifest claims for a target, and the record of what was observed (``capability-probes``)."""
