"""The shared core of the experiments: the experiment spec, configs and their CLI, workdirs, multi-process
runs, plotting, and the statistics the verdicts use (intervals, verdicts, tolerance, rules version)."""
