"""Every experiment andrea ships says in one line what it does (its `# summary:` comment), for --help."""

from andrea.train.experiments import summaries
from tests.compose import group_options


def test_every_experiment_has_a_one_line_summary():
    found = summaries()
    assert sorted(found) == sorted(group_options("experiment") + [f"gpu/{n}" for n in group_options("experiment/gpu")])
    for name, summary in found.items():
        assert 10 <= len(summary) <= 100 and "\n" not in summary, name
