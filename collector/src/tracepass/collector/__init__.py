"""OTLP collector: receive spans, rebuild conversations, score them, export metrics."""
