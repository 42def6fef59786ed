"""Real parts used by tests, benchmarks and `dsh-memory serve`: a fake OpenAI server, a Prefect server runner."""
