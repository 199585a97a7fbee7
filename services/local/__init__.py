"""Development infrastructure on one machine: the project's own Kafka broker, an ASGI app served
in a thread, a worker as a child process, and the feeder that publishes a recorded stream as a
gateway would. Nothing here is needed to run modelevents against a real cluster."""
