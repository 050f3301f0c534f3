"""A listening test for the human baseline: balanced sampling, a small web app, analysis and export.

The published human evaluation coupled direction with trajectory (SPEC §8); `listening.sampler` balances
direction within every tier x curve cell. The app stores answers in SQLite and exports them in the harness's
samples format, so the human row reaches `harness report` and the leaderboard like any model's run.
Dependency direction: this package imports `vocalgrad_dataset` and `harness`, never the other way round.
"""
