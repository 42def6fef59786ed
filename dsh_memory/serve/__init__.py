"""Serving: the loopback HTTP app (RPC, hooks, MCP mount), the MCP server, the one-command stack
`serve` runs (and the Prefect server it starts), the deployments built from prefect.yaml, and
the pipeline status shared by the CLI and the RPC."""
