"""Users' kernels (examples/) tuned through the API and the CLI, and configs picked at run time.

`python -m experiments.user_kernels.run PART` (GPU machine) tunes one example kernel at its
shapes and, for the row kernels, compares run-time config choices at shapes held out of the
table; `python -m experiments.user_kernels.report` writes report/README.md from the results.
"""
