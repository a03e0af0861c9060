"""The one grammar of what a job says in its Slurm ``--comment``: keys, units, what is ignored."""

from __future__ import annotations

import pytest

from orchestrator.contracts.job_comment import JobComment, parse_job_comment


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", JobComment()),
        ("ckpt=10m", JobComment(ckpt_hours=10 / 60)),
        ("llm-7b ckpt=90s, evict=refuse", JobComment(90 / 3600, "refuse")),
        ("evict=WAIT;ckpt=2h", JobComment(2.0, "wait")),
        ("ckpt=1.5", JobComment(ckpt_hours=1.5)),
        ("team=llm ckpt=10s evict=go", JobComment(10 / 3600, "go", ignored=("team=llm",))),
        ("ckpt=soon evict=maybe", JobComment(ignored=("ckpt=soon", "evict=maybe"))),
        ("ckpt=0s ckpt=-5m", JobComment(ignored=("ckpt=0s", "ckpt=-5m"))),
        ("evict=go evict=refuse", JobComment(evict="go", ignored=("evict=refuse",))),
    ],
)
def test_a_comment_reads_by_one_grammar_and_ignores_what_it_cannot_read(text, want):
    """Known keys are read with their units; unknown, unreadable or repeated keys are kept
    verbatim as ignored and change nothing else; free words mean nothing."""
    assert parse_job_comment(text) == want
