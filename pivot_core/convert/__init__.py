"""Format converters: each `<fmt>.py` holds a `from_<fmt>` / `to_<fmt>` pair and a `detect` check."""
