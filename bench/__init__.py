"""Benchmarks run by `make bench`; each module prints its figures against a baseline measured in the same run."""
