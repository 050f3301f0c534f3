"""The VocalGrad leaderboard: a versioned submission format, its validator, and a static site builder.

schema.py    the submission JSON schema (results.json + samples + model metadata), versioned
submit.py    `harness leaderboard submit RUN_DIR`: a submission from a harness run directory
validate.py  `harness leaderboard validate SUB.json`: ids, counts, parser version, samples, recomputed metrics
build.py     `harness leaderboard build SUBS_DIR --out OUT`: index.html (sortable), leaderboard.md, .csv, Space README
cli.py       the `harness leaderboard` subcommands
"""
