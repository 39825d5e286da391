"""Offline pivot profiling: K samples per pivot from a frozen policy, verified, with a Profile each."""

from trainers.profiling._profiler import ProfileConfig, ProfileSummary, completed_ids, profile_pivots
from trainers.profiling._report import domain_rows, harness_rows, plot_histograms

__all__ = [
    "ProfileConfig",
    "ProfileSummary",
    "completed_ids",
    "domain_rows",
    "harness_rows",
    "plot_histograms",
    "profile_pivots",
]
