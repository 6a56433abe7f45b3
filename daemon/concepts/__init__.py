"""Concepts and categories of long documents, built on the machine (decision 0033)."""
