"""Migration between bundles: what is compared (bundles), how (eval), what is decided
(decisions), and whether live traffic still matches what was decided."""
