"""Phase 2 (global consolidation) logic, free of Prefect: gather the capped model input
(`inputs`), parse the model's answer (`output`), validate and write it (`apply`), decide whether
to run (`gate`) and report the attempt (`result`). Tasks and the flow live in tasks/ and flows/."""
