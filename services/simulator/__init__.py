"""A local HTTP server that speaks the providers' endpoints from recorded streams (tests and the demo)."""
