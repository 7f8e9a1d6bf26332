"""Vertex AI training workbench: job model, per-replica environment, local runner."""

__version__ = "0.1.0"
