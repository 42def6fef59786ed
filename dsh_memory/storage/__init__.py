"""Storage under the memory root: the memory files with atomic writes and the path guard
(`store`; their formats and write primitives: `store_format`), the SQLite bookkeeping (`state`;
its schema, records and claim owners: `state_schema`), and kernel-released locks (`locks`)."""
