"""The labelled quality set (sessions, labels.json) and the metrics of bench/bench_quality.py."""
