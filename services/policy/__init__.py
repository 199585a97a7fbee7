"""Policies the services enforce or check against: the hosted-tool section of the policy file."""
