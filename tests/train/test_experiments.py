"""Every experiment andrea ships says in one line what it does (its `# summary:` comment), for --help."""

from andrea.train.experiments import summaries
from tests.compose import group_options


def test_every_experiment_has_a_one_line_summary():
    found = summaries()
    assert sorted(found) == group_options("experiment")
    for name, summary in found.items():
        assert 10 <= len(summary) <= 100 and "\n" not in summary, name
