"""Built-in verifiers and parsers, each a plugin module registered through the public hooks."""
