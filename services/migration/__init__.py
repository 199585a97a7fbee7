"""Migration between providers, models, prompts and adapters: bundles, evaluation, adapter
parity, decision records and capability probes, each in a subpackage of its own."""
