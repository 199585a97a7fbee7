"""Pure renderers of the neutral request into each provider API's wire request (the reverse of the adapters)."""
