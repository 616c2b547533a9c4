"""jurybox.benchmarks."""
