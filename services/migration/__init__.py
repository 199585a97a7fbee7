"""Migration between providers, models, prompts, tools and adapters, one layer at a time:
bundles (what is compared), the eval corpus and its hard gates (how), decision records (what is
decided). docs/migration.md is the user's guide.
"""
