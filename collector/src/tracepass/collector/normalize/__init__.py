"""Map spans of every supported instrumentation convention to `SpanRecord`s."""
