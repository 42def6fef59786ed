"""Transcript stage: a Session rendered as the compact text a model reads (`render`), secrets
redacted (`redact`), and token counting for the budget (`tokens`)."""
