"""Usage and spending caps: the hourly aggregate, the charts, the caps (issue 30)."""
