"""User workflows on top of the collector: the CLI (`cli/`), the demo, probing an agent
and HTML reports. Nothing below `app` imports it."""

__all__: list[str] = []
