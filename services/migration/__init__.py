"""Migration: what is compared (bundles), how (the eval corpus, hard gates, comparison), what is
decided (decision records) and what is verified (capability probes), one subpackage each."""
