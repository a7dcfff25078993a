"""Helpers for the service tests (not collected as tests)."""
