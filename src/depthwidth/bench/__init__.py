"""Measurements of built models: hardware profile, inference latency and throughput."""
