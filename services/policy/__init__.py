"""Tenant policy the services read themselves: ``hosted`` (provider-hosted tools — egress and
source trust), the ``hosted:`` section of the tool executor's policy file."""
