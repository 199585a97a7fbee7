"""Migration between bundles: what is compared, how, and what is decided (docs/migration.md)."""
