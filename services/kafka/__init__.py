"""Kafka plumbing: the settings that say where Kafka is and what the topics are called, the
clients every part of the pipeline uses (producers, consumers, reading a topic), and topic
administration (create, verify, delete)."""
