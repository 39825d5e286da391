"""The four domains: each a `PivotEnv` subclass with a default chain and a bundled sample."""
