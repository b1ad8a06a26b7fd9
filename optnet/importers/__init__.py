"""Workload importers: turn descriptions users already have into an instance's workload section."""
