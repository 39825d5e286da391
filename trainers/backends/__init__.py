"""Generation backends (transformers, OpenAI-compatible servers, vLLM) behind one interface."""
