"""Test and benchmark helpers that are real parts (a fake OpenAI server, a Prefect server runner)."""
