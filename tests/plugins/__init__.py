"""Plugins used by the tests, written as a third party would write them."""
