"""What every floor may use: errors and the signals that stop a run, files written whole, the embedded engine and
model, and the statistics (Student-t comparisons of launches, percentiles)."""
