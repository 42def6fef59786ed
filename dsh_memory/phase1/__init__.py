"""Phase 1, per session: which sessions to extract and why (`selection`), the transcript → model →
files step (`extraction`), and the versioned Phase 1 prompt and tool schema (`prompt`)."""
