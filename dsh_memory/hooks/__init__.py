"""Turn-end notifications: validation, the Prefect event, the HTTP receiver."""
