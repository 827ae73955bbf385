"""The README tells the truth about what is installed: its config-group table lists every option conf/ holds."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def readme_table() -> dict[str, set[str]]:
    """group -> the option names its row of the README's config-group table gives (keys like `mask.window` left out)."""
    table = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        row = re.match(r"^\| `(\w+)/` \| (.*) \|$", line)
        if row:
            table[row[1]] = {name for name in re.findall(r"`([^`]+)`", row[2]) if not re.search(r"[.=/\\ ]", name)}
    return table


def test_the_config_group_table_lists_every_option_conf_holds():
    table = readme_table()
    groups = {path.name for path in (ROOT / "conf").iterdir() if path.is_dir() and path.name != "hydra"}
    assert set(table) == groups
    for group in groups:
        options = {path.stem for path in (ROOT / "conf" / group).glob("*.yaml")}
        assert table[group] == options, (group, table[group] ^ options)
